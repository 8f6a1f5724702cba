"""Grafana's failure panel splits by Triton's own failure reason, checked against a live scrape."""

from __future__ import annotations

import json
import re
import urllib.request

from tests.support.prerequisites import PROJECT_ROOT
from triton_kit.server import TritonServer

DASHBOARD = PROJECT_ROOT / "deploy/grafana/dashboards/triton.json"


def _failure_panel() -> dict:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    (panel,) = [p for p in panels if "nv_inference_request_failure" in json.dumps(p)]
    return panel


def test_failures_are_shown_by_reason_that_triton_exports(triton_server: TritonServer) -> None:
    (target,) = _failure_panel()["targets"]
    assert re.search(r"sum by \(model, reason\)", target["expr"]), target["expr"]
    assert "{{reason}}" in target["legendFormat"]
    with urllib.request.urlopen(triton_server.metrics_url, timeout=10) as response:
        scrape = response.read().decode()
    reasons = set(re.findall(r'nv_inference_request_failure\{[^}]*reason="(\w+)"', scrape))
    assert {"REJECTED", "BACKEND"} <= reasons, reasons  # REJECTED: queue full / queue timeout

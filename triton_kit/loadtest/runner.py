"""The headless stepped run: server, one Locust process per protocol, summary, plots, SLOs.

Locust runs as a subprocess (``python -m locust``) so that gevent's monkey-patching stays
out of this process, and so a stuck run can be killed as a process group: the run is
bounded by its step schedule plus a grace period, whatever happens inside Locust.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from triton_kit.loadtest import metadata
from triton_kit.loadtest.options import USER_CLASS_NAMES, parse_pairs, parse_steps
from triton_kit.loadtest.reports import files as report
from triton_kit.loadtest.reports import html as html_report
from triton_kit.loadtest.reports.slo import Slo, capacities
from triton_kit.loadtest.reports.stability import StabilityRule
from triton_kit.loadtest.reports.summary import StepResult, load_results

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILES = "triton_kit/loadtest/locustfile.py,triton_kit/loadtest/stepped.py"
START_GRACE_S = 60.0  # Locust start-up, corpus generation, and writing its reports
EXIT_CODE_SLO = 1
EXIT_CODE_FAILED = 2


class RunFailed(RuntimeError):
    """The run could not produce results (no model loaded, Locust crashed or hung)."""


@dataclass
class RunConfig:
    models: list[str] = field(default_factory=lambda: list(USER_CLASS_NAMES))
    protocols: list[str] = field(default_factory=lambda: ["grpc", "http"])
    hosts: list[str] = field(default_factory=list)
    steps: str = "1,2,4,8"
    step_time: float = 12.0
    settle_time: float = 4.0
    weights: str = ""
    model_names: list[str] = field(default_factory=list)
    slo: Slo = field(default_factory=Slo)
    out: Path | None = None
    model_repository: Path = PROJECT_ROOT / "model_repository"
    locust_args: list[str] = field(default_factory=list)
    stability: StabilityRule = field(default_factory=StabilityRule)

    @property
    def duration_s(self) -> float:
        return len(parse_steps(self.steps)) * self.step_time


def default_out() -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return PROJECT_ROOT / "reports" / "loadtest" / stamp


@contextlib.contextmanager
def server_urls(config: RunConfig, out: Path) -> Iterator[list[str]]:
    """``--host`` URLs as given, or an embedded Triton's URL for each protocol."""
    if config.hosts:
        yield config.hosts
        return
    from triton_kit.server import ServerConfig, ServerError, TritonServer

    server_config = ServerConfig(
        model_repository=config.model_repository,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        log_file=out / "tritonserver.log",
    )
    print(f"starting the embedded Triton on {config.model_repository} ...", flush=True)
    server = TritonServer(server_config)
    try:
        server.start()
    except ServerError as exc:
        raise RunFailed(f"the embedded Triton did not start: {exc}") from exc
    try:
        urls = {"grpc": server.grpc_url, "http": server.http_url}
        yield [urls[p] for p in config.protocols]
    finally:
        server.stop()


def loaded_families(url: str, config: RunConfig) -> list[str]:
    """Families whose model is ready on ``url``; the others are named and skipped."""
    from triton_kit.client import TritonClient, TritonClientError

    names = parse_pairs(config.model_names)
    ready = []
    with TritonClient(url, timeout=30) as client:
        try:
            up = client.server_ready()
        except TritonClientError as exc:  # DNS, TLS, timeout: say so rather than "not ready"
            raise RunFailed(f"cannot check {url}: {exc}") from exc
        if not up:
            raise RunFailed(f"no ready Triton server answers on {url}")
        for family in config.models:
            model = names.get(family, family)
            if client.model_ready(model):
                ready.append(family)
            else:
                print(f"  {family}: model {model!r} is not loaded on {url}: skipped", flush=True)
    return ready


def locust_command(url: str, families: Sequence[str], config: RunConfig, out: Path) -> list[str]:
    command = [
        sys.executable, "-m", "locust", "-f", LOCUSTFILES, "--headless",
        "--host", url,
        "--steps", config.steps,
        "--step-time", str(config.step_time),
        "--settle-time", str(config.settle_time),
        "--run-time", f"{int(config.duration_s + 0.999)}s",
        "--raw-out", str(out / "raw.npz"),
        "--csv", str(out / "locust"),
        "--html", str(out / "locust.html"),
        "--exit-code-on-error", "0",
        "--only-summary",
    ]  # fmt: skip
    if config.stability.enabled:
        rule = config.stability
        command += ["--stability-window", str(rule.window_s)]
        command += ["--stability-tolerance", str(rule.tolerance)]
        command += [
            "--stability-windows",
            str(rule.windows),
            "--min-samples",
            str(rule.min_samples),
        ]
    if config.weights:
        command += ["--weights", config.weights]
    for pair in config.model_names:
        command += ["--model-name", pair]
    return [*command, *config.locust_args, *(USER_CLASS_NAMES[f] for f in families)]


def run_locust(command: list[str], log: Path, timeout_s: float) -> None:
    """Run in its own process group; on overrun, SIGTERM then SIGKILL the whole group."""
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            command,
            cwd=PROJECT_ROOT,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise RunFailed(f"Locust did not exit within {timeout_s:.0f} s; see {log}") from exc
        finally:
            _kill_group(process)
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise RunFailed(f"Locust exited with code {code}; {log} ends with:\n{tail}")


def _kill_group(process: subprocess.Popen) -> None:
    """Nothing of a run may outlive it: children included, even after a clean exit."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def run_protocol(url: str, config: RunConfig, out: Path) -> list[StepResult]:
    from triton_kit.client.transport import Endpoint

    protocol = Endpoint.parse(url).protocol
    families = loaded_families(url, config)
    if not families:
        print(f"  {protocol}: no requested model is loaded on {url}: skipped", flush=True)
        return []
    target = out / protocol
    target.mkdir(parents=True, exist_ok=True)
    print(
        f"{protocol}: {', '.join(families)} on {url}, steps {config.steps} x "
        f"{config.step_time:g} s ...",
        flush=True,
    )
    started = time.monotonic()
    command = locust_command(url, families, config, target)
    run_locust(command, target / "locust.log", config.duration_s + START_GRACE_S)
    print(f"  done in {time.monotonic() - started:.1f} s", flush=True)
    return load_results(target / "raw.npz", protocol)


def run(config: RunConfig) -> int:
    """Returns the process exit code: 0, EXIT_CODE_SLO on a breach, EXIT_CODE_FAILED."""
    out = config.out or default_out()
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    results: list[StepResult] = []
    try:
        with server_urls(config, out) as urls:
            meta = metadata.collect(PROJECT_ROOT, urls[0], config.models, started)
            for url in urls:
                results += run_protocol(url, config, out)
    except RunFailed as exc:
        print(f"load test failed: {exc}", file=sys.stderr)
        return EXIT_CODE_FAILED
    if not results:
        print("load test failed: no model was load-tested", file=sys.stderr)
        return EXIT_CODE_FAILED
    found = capacities(results, config.slo)
    written = report.write_tables(results, out, config.slo, meta)
    written += report.write_plots(results, out, config.slo.p99_ms)
    written.append(html_report.write_index(results, out, found, meta))
    print(report.markdown(report.ordered(results)).split("\n\n")[0])  # the main table
    if found:
        print(report.capacity_markdown(found))
    print("wrote " + ", ".join(str(p.relative_to(out)) for p in written) + f" in {out}")
    breaches = config.slo.breaches(results)
    for breach in breaches:
        print(f"SLO breach: {breach}", file=sys.stderr)
    return EXIT_CODE_SLO if breaches else 0

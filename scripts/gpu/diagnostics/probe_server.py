"""The probes' server: plain python models (no project code in the stub) from a temporary
repository, served by the embedded Triton. Shared by scripts/gpu/diagnostics/probe_*.py."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def probe_server(models: dict[str, tuple[str, str]], log: Path) -> Iterator[str]:
    """Serve ``{name: (model.py text, config.pbtxt text)}``; yields the gRPC address."""
    from triton_kit.server import ServerConfig, TritonServer

    repo = Path(tempfile.mkdtemp()) / "repo"
    for name, (model, config) in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(model)
        (repo / name / "config.pbtxt").write_text(config)
    config = ServerConfig(repo, http_port=0, grpc_port=0, metrics_port=0, log_file=log)
    with TritonServer(config) as server:
        yield server.grpc_url.removeprefix("grpc://")

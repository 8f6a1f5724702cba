"""What a report was measured on: commit, Triton's model configs, machine and versions.

A latency figure means little without the batching and instance settings that produced it
and the machine it ran on, so every report carries them. The model settings are read from
the running Triton (``get_model_config``), not from files, so they describe what served.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from triton_kit.client.transport import Endpoint

PACKAGES = ("tritonclient", "locust", "gevent", "grpcio", "numpy")


@dataclass(frozen=True)
class ModelSettings:
    """The serving settings of one Triton model that shape its latency."""

    name: str
    platform: str
    max_batch_size: int
    instances: str  # e.g. "2 x KIND_CPU"; "" for an ensemble
    max_queue_delay_us: int | None  # None: no dynamic batching
    preferred_batch_sizes: tuple[int, ...]

    @classmethod
    def of(cls, config: dict[str, Any]) -> ModelSettings:
        batching = config.get("dynamic_batching")
        groups = config.get("instance_group") or []
        instances = ", ".join(f"{int(g.get('count', 1))} x {g.get('kind', '?')}" for g in groups)
        return cls(
            name=config.get("name", ""),
            platform=config.get("platform") or config.get("backend") or "",
            max_batch_size=int(config.get("max_batch_size", 0)),
            instances=instances,
            max_queue_delay_us=(
                int(batching.get("max_queue_delay_microseconds", 0))
                if isinstance(batching, dict)
                else None
            ),
            preferred_batch_sizes=tuple(
                int(v) for v in (batching or {}).get("preferred_batch_size", [])
            ),
        )


@dataclass(frozen=True)
class RunMetadata:
    commit: str
    started_utc: str
    command: str
    machine: dict[str, str]
    versions: dict[str, str]
    models: tuple[ModelSettings, ...]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def git_commit(root: Path) -> str:
    """HEAD's hash, marked ``-dirty`` when the work tree differs; "unknown" outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, str]:
    return {
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cpu_count": str(os.cpu_count() or 0),
        "os": platform.platform(),
    }


def versions(triton_version: str) -> dict[str, str]:
    found = {"triton": triton_version, "python": sys.version.split()[0]}
    for name in PACKAGES:
        try:
            found[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def _client(url: str) -> Any:
    endpoint = Endpoint.parse(url)
    if endpoint.protocol == "grpc":
        import tritonclient.grpc as module
    else:
        import tritonclient.http as module
    return endpoint, module.InferenceServerClient(endpoint.address, ssl=endpoint.ssl)


def _belongs(name: str, models: list[str]) -> bool:
    return any(name == m or name.startswith(m + "_") for m in models)


def server_facts(url: str, models: list[str]) -> tuple[str, tuple[ModelSettings, ...]]:
    """(Triton's version, settings of every loaded model that is or composes ``models``)."""
    endpoint, client = _client(url)
    grpc = endpoint.protocol == "grpc"
    kwargs = {"as_json": True} if grpc else {}
    try:
        server = client.get_server_metadata(**kwargs)
        # Statistics list the loaded models and stay open; the repository index needs the
        # restricted-API key (triton_kit/server/security.py).
        stats = client.get_inference_statistics(**kwargs)
        ready = [e["name"] for e in stats.get("model_stats", [])]
        names = sorted({name for name in ready if _belongs(name, models)})
        settings = []
        for name in names:
            config = client.get_model_config(name, **kwargs)
            settings.append(ModelSettings.of(config.get("config", {}) if grpc else config))
        return str(server.get("version", "unknown")), tuple(settings)
    finally:
        client.close()


def collect(root: Path, url: str | None, models: list[str], started_utc: str) -> RunMetadata:
    """Everything a reader needs to reproduce or compare a run; the server part if reachable."""
    triton, settings = "unknown", ()
    if url is not None:
        try:
            triton, settings = server_facts(url, models)
        except Exception as exc:  # a report without model settings beats no report
            triton = f"unknown ({exc})"
    return RunMetadata(
        commit=git_commit(root),
        started_utc=started_utc,
        command=" ".join(sys.argv),
        machine=machine(),
        versions=versions(triton),
        models=settings,
    )


def markdown(meta: RunMetadata) -> str:
    lines = ["## Run", ""]
    lines += [f"- commit: `{meta.commit}`", f"- started (UTC): {meta.started_utc}"]
    lines += [f"- command: `{meta.command}`"]
    lines += [f"- machine: {', '.join(f'{k} {v}' for k, v in meta.machine.items())}"]
    lines += [f"- versions: {', '.join(f'{k} {v}' for k, v in meta.versions.items())}"]
    lines += ["", "| Triton model | platform | max batch | instances | queue delay µs "]
    lines[-1] += "| preferred batch |"
    lines += ["|---|---|--:|---|--:|---|"]
    for m in meta.models:
        delay = "no dynamic batching" if m.max_queue_delay_us is None else m.max_queue_delay_us
        preferred = ",".join(map(str, m.preferred_batch_sizes)) or "-"
        lines.append(
            f"| {m.name} | {m.platform} | {m.max_batch_size} | {m.instances or '-'} | {delay} "
            f"| {preferred} |"
        )
    return "\n".join(lines) + "\n"

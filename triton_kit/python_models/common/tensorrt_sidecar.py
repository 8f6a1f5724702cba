"""What the server side needs to know about TensorRT plans in a repository, standard library only.

``SIDECAR_NAME`` is the record the build writes beside every plan, :class:`Sidecar` its
contents (both defined once, here: the build writes it, ``triton_kit.server.plan_check`` reads it).
Version-compatible plans embed a lean runtime (host code) that Triton's TensorRT backend only
runs when started with ``--backend-config=tensorrt,version-compatible=true`` (tensorrt_backend
r24.10, src/tensorrt.cc and src/loader.cc). The compose service asks this module for it:

    python3 -m triton_kit.python_models.common.tensorrt_sidecar backend-config /models

prints that flag when the repository holds such a plan, and nothing otherwise. Python 3.10.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

SIDECAR_NAME = "model.plan.json"
VERSION_COMPATIBLE_FLAG = "--backend-config=tensorrt,version-compatible=true"


@dataclass(frozen=True)
class Sidecar:
    """What built a plan: TensorRT version, GPU, precision, profiles, options, rebuild command."""

    model: str
    family: str
    tensorrt_version: str
    gpu_name: str
    compute_capability: str
    precision: str
    onnx_sha256: str
    profiles: list[dict[str, dict[str, list[int]]]]
    build_options: dict[str, object]
    rebuild_command: str
    built_at: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Sidecar:
        return cls(**json.loads(text))

    @classmethod
    def read(cls, path: Path) -> Sidecar:
        return cls.from_json(Path(path).read_text())


def sidecars(repository: Path) -> list[Path]:
    return sorted(Path(repository).glob(f"*/*/{SIDECAR_NAME}"))


def is_version_compatible(sidecar: Path) -> bool:
    try:
        record = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return False
    return bool(record.get("build_options", {}).get("version_compatible"))


def backend_config_args(repository: Path) -> list[str]:
    """The tritonserver flags this repository's plans need."""
    if any(is_version_compatible(path) for path in sidecars(repository)):
        return [VERSION_COMPATIBLE_FLAG]
    return []


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "backend-config":
        print(
            "usage: python -m triton_kit.python_models.common.tensorrt_sidecar "
            "backend-config REPOSITORY",
            file=sys.stderr,
        )
        return 2
    print(" ".join(backend_config_args(Path(args[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

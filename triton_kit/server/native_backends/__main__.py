"""``python -m triton_kit.server.native_backends build``: compile Triton's own backends for the
embedded server from the pinned r24.10 sources against this environment's wheels."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from triton_kit.server.native_backends import (
    NATIVE_BACKENDS,
    OPT_IN_BACKENDS,
    SERVED_BACKENDS,
    default_out,
)
from triton_kit.server.native_backends.aoti import AOTI_BACKEND, build_aoti
from triton_kit.server.native_backends.build import BuildSettings, build
from triton_kit.server.native_backends.ct2_backend import CT2_BACKEND, build_ctranslate2
from triton_kit.server.native_backends.errors import NativeBackendError
from triton_kit.server.native_backends.sources import (
    DEFAULT_SOURCE_DIRS,
    SOURCES_ENV,
    source_dir_candidates,
)


@dataclass(frozen=True)
class BuildCommand:
    backends: tuple[str, ...]
    settings: BuildSettings


def parse(argv: list[str]) -> BuildCommand:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.server.native_backends",
        description=(
            "Build Triton's own onnxruntime and pytorch backends (branch r24.10, the 24.10 "
            "container's) against this environment's onnxruntime and torch, and ctranslate2 (the "
            "kit's own backend serving CTranslate2 models, linked to the ctranslate2 wheel: the "
            "default nmt is its text mode, which needs libsentencepiece-dev, "
            "scripts/install-system-deps.sh), for the embedded tritonserver; on request "
            "pytorch_aoti (Triton's newer pytorch backend, for AOTInductor packages, from "
            "third_party/triton-aoti). Skips a backend whose sources, patches, flags and "
            "framework version have not changed since its last build."
        ),
    )
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser(
        "build", help=f"build the native backends (default: {', '.join(NATIVE_BACKENDS)})"
    )
    cmd.add_argument(
        "backends",
        nargs="*",
        metavar="BACKEND",
        help=f"which to build: {', '.join(SERVED_BACKENDS)} (default: "
        f"{', '.join(NATIVE_BACKENDS)}; {', '.join(OPT_IN_BACKENDS)} only when named)",
    )
    cmd.add_argument(
        "--sources",
        type=Path,
        default=None,
        help=f"folder of the pinned source archives (sha256-checked). Default: ${SOURCES_ENV}, "
        f"else {DEFAULT_SOURCE_DIRS[0].name} beside the checkout's parent "
        "(../shared/triton-src), else clone the pinned commits from GitHub",
    )
    cmd.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where the libraries go (default: build/triton-backends)",
    )
    cmd.add_argument(
        "--work",
        type=Path,
        default=None,
        help="scratch folder for sources and CMake (default: <out>/.work)",
    )
    cmd.add_argument(
        "--gpu",
        choices=["auto", "on", "off"],
        default="auto",
        help="the pytorch backend's CUDA support (auto: as the torch wheel is)",
    )
    cmd.add_argument("--jobs", type=int, default=None, help="parallel compile jobs")
    cmd.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.backends) - set(SERVED_BACKENDS))
    if unknown:
        parser.error(f"unknown backend {', '.join(unknown)}: choose from {SERVED_BACKENDS}")
    out = args.out or default_out()
    return BuildCommand(
        backends=tuple(args.backends or NATIVE_BACKENDS),
        settings=BuildSettings(
            out=out,
            work=args.work or out / ".work",
            archives=args.sources,
            gpu={"auto": None, "on": True, "off": False}[args.gpu],
            jobs=args.jobs,
            force=args.force,
            tritonserver_library=_wheel_server_library(),
        ),
    )


def _wheel_server_library() -> str | None:
    """The nvidia-pytriton wheel renames libtritonserver.so; its backends must NEED that name."""
    from triton_kit.server.binary import find_installation

    installation = find_installation()
    library = installation.server_library if installation.from_wheel else None
    return library.name if library is not None else None


def _build_aoti(settings: BuildSettings) -> None:
    """The script reads ``<carry>/triton-src`` (the r24.10 archives) for one variant only."""
    carry = next(iter(source_dir_candidates(settings.archives))).parent
    build_aoti(
        settings.out,
        carry=carry,
        force=settings.force,
        server_library=settings.tritonserver_library,
    )


def main(argv: list[str] | None = None) -> int:
    command = parse(sys.argv[1:] if argv is None else argv)
    try:
        for backend in command.backends:
            if backend == AOTI_BACKEND:
                _build_aoti(command.settings)
            elif backend == CT2_BACKEND:
                build_ctranslate2(command.settings)
            else:
                build(backend, command.settings)
    except NativeBackendError as exc:
        print(f"native backends: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

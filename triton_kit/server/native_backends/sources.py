"""The pinned r24.10 sources of Triton's backends: a local folder of archives, else GitHub.

The 24.10 container runs these exact commits, so a backend built from them behaves as the
container's does. Archives are checked against the sha256 pinned here; a clone is checked
out at the pinned commit. Either way the result is one folder per archive name.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from triton_kit.server.native_backends.errors import NativeBackendError

SOURCES_ENV = "TRITON_KIT_TRITON_SRC"
_PROJECT_ROOT = Path(__file__).resolve().parents[3]
# CI and the lent machines keep the archives beside the checkout (no GitHub there).
DEFAULT_SOURCE_DIRS = (_PROJECT_ROOT.parent / "shared" / "triton-src",)


@dataclass(frozen=True)
class Source:
    """One upstream tree: the archive it ships as, and where a clone would come from."""

    name: str
    archive: str
    sha256: str
    repository: str
    commit: str


SOURCES = {
    source.name: source
    for source in (
        Source(
            "core",
            "core-r24.10.tar.gz",
            "55efeedad34239841aaccbdcfff50009e56c4f218f1cfef8c013c3053342fd92",
            "https://github.com/triton-inference-server/core",
            "bfec7c61dc0939433f64f14e89b1973073eac8ba",
        ),
        Source(
            "common",
            "common-r24.10.tar.gz",
            "5c70ebd357a8f591c0f71ddbe306f027f2871143e7b3b6ea548856d29995172b",
            "https://github.com/triton-inference-server/common",
            "578491fc3944f77d16a6a38e3d7691c485c47ba0",
        ),
        Source(
            "backend",
            "backend-r24.10.tar.gz",
            "8626219e5c0442319c8c4bf1612f3471a3e2ce3a73adfbe400b217a03e605368",
            "https://github.com/triton-inference-server/backend",
            "ac03a5d97403dec841ad46d0439e93db12c9268f",
        ),
        Source(
            "onnxruntime_backend",
            "onnxruntime_backend-r24.10.tar.gz",
            "3a8249bab3fdfc6df26e2cbb7c0fc1b974ee74a57fa2ceb279c41ec40fbaf9b3",
            "https://github.com/triton-inference-server/onnxruntime_backend",
            "17e5cb23a6fbeb37282eb7079dd0b580cd79530d",
        ),
        Source(
            "pytorch_backend",
            "pytorch_backend-r24.10.tar.gz",
            "54db89c8be2b5b9a48065bc7d536008eb8ebeaed490296c84a0b4819aa2f4b8d",
            "https://github.com/triton-inference-server/pytorch_backend",
            "e97a90061f7399b25368e2cb1f6d5c40f8cbae4e",
        ),
        # ONNX Runtime's C API headers (ORT_API_VERSION 29), as vendored by onnxruntime_go:
        # the onnxruntime wheel ships the library but no headers.
        Source(
            "onnxruntime-c-api-1.29",
            "onnxruntime-c-api-1.29.tar.gz",
            "5a3897ac97e9876cfe40fe7c8028a1f13a8d3d2d9c9b5cd20c51a83bdb94a24a",
            "https://github.com/yalue/onnxruntime_go",
            "8ce7fa5882bb3ac038bacdd53bfe02da3691899f",
        ),
    )
}


def source_dir_candidates(explicit: Path | None) -> list[Path]:
    """Where archives are looked for: the flag, then $TRITON_KIT_TRITON_SRC, then ../shared."""
    if explicit is not None:
        return [explicit]
    from_env = os.environ.get(SOURCES_ENV)
    return [Path(from_env)] if from_env else list(DEFAULT_SOURCE_DIRS)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(names: list[str], dest: Path, archives: Path | None) -> dict[str, Path]:
    """Unpack (or clone) each named source into ``dest/<name>``; returns the folders."""
    folder = next((d for d in source_dir_candidates(archives) if d.is_dir()), None)
    if archives is not None and folder is None:
        raise NativeBackendError(f"--sources {archives} is not a folder")
    dest.mkdir(parents=True, exist_ok=True)
    trees = {}
    for name in names:
        source = SOURCES[name]
        tree = dest / name
        if tree.exists():
            shutil.rmtree(tree)
        if folder is not None:
            _unpack(folder / source.archive, source, dest)
        else:
            _clone(source, tree)
        trees[name] = tree
    return trees


def _unpack(archive: Path, source: Source, dest: Path) -> None:
    if not archive.is_file():
        raise NativeBackendError(
            f"{archive} is missing: the folder of Triton sources must hold {source.archive} "
            f"(or pass --sources DIR; without any, the sources are cloned from GitHub)"
        )
    actual = sha256_of(archive)
    if actual != source.sha256:
        raise NativeBackendError(
            f"{archive} has sha256 {actual}, not the pinned {source.sha256}: refusing to build "
            "from an archive that is not the r24.10 release source"
        )
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # 3.10.12+: refuse links and paths out of dest
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)


def _clone(source: Source, tree: Path) -> None:
    """A user's machine with GitHub: the same commit the archives were made from."""
    if shutil.which("git") is None:
        raise NativeBackendError(
            f"no archive folder ({', '.join(map(str, DEFAULT_SOURCE_DIRS))} or ${SOURCES_ENV}) "
            "and no git to clone the Triton sources"
        )
    run = ["git", "-c", "advice.detachedHead=false"]
    subprocess.run([*run, "init", "-q", str(tree)], check=True)
    subprocess.run(
        [*run, "-C", str(tree), "fetch", "-q", "--depth", "1", source.repository, source.commit],
        check=True,
    )
    subprocess.run([*run, "-C", str(tree), "checkout", "-q", "FETCH_HEAD"], check=True)

"""Build Triton's own onnxruntime and pytorch backends against this environment's wheels.

The recipe verified on these machines (shared/triton-src/README.md): the r24.10 sources,
FetchContent pointed at local folders, the patches in ``patches.py``, CMake + Ninja, then
patchelf so the library finds the nvidia-pytriton wheel's renamed ``libtritonserver`` and
the framework's libraries without LD_LIBRARY_PATH.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from triton_kit.server.native_backends import frameworks, patches, sources
from triton_kit.server.native_backends.errors import NativeBackendError
from triton_kit.server.native_backends.frameworks import Framework
from triton_kit.server.native_backends.provenance import Provenance, up_to_date

TOOLS = ("cmake", "ninja", "g++", "patchelf")
SYSTEM_DEPS_HINT = "bash scripts/install-system-deps.sh (as root) installs them"


@dataclass(frozen=True)
class BackendRecipe:
    """One backend: its sources, the framework it links and the CMake target to build."""

    name: str
    source: str
    framework: str
    target: str
    library: str


RECIPES = {
    "onnxruntime": BackendRecipe(
        "onnxruntime",
        "onnxruntime_backend",
        "onnxruntime",
        "triton-onnxruntime-backend",
        "libtriton_onnxruntime.so",
    ),
    "pytorch": BackendRecipe(
        "pytorch", "pytorch_backend", "torch", "triton-pytorch-backend", "libtriton_pytorch.so"
    ),
}
SHARED_SOURCES = ["core", "common", "backend"]


@dataclass(frozen=True)
class BuildSettings:
    """Where sources come from and builds go; ``gpu=None`` follows the torch wheel."""

    out: Path
    work: Path
    archives: Path | None = None
    gpu: bool | None = None
    jobs: int | None = None
    force: bool = False
    tritonserver_library: str | None = None  # the wheel's renamed libtritonserver, if any


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def require_tools(name: str) -> None:
    missing = missing_tools()
    if missing:
        raise NativeBackendError(
            f"cannot build Triton's {name} backend: {', '.join(missing)} not found; "
            + SYSTEM_DEPS_HINT
        )


def build(name: str, settings: BuildSettings, log: Callable[[str], None] = print) -> Path:
    """Build ``name`` into ``settings.out/<name>/`` unless an identical build is there."""
    recipe = RECIPES[name]
    framework = frameworks.require(recipe.framework)
    gpu = _gpu_mode(recipe, framework, settings.gpu)
    args = _cmake_args(recipe, framework, gpu, settings.work)
    key = _recipe_key(recipe, framework, gpu, args, settings.tritonserver_library)
    folder = settings.out / name
    if not settings.force and up_to_date(folder, recipe.library, key):
        log(f"{name}: up to date ({folder / recipe.library})")
        return folder / recipe.library
    require_tools(name)
    started = time.monotonic()
    log(
        f"{name}: building {recipe.source} r24.10 against {framework.distribution} "
        f"{framework.version} ({'GPU' if gpu else 'CPU'})"
    )
    if recipe.framework == "onnxruntime":
        _link_unversioned(frameworks.onnxruntime_library(framework), settings.work / "ort-lib")
    build_dir = compile_backend(
        name, recipe.source, recipe.target, args, settings, gpu, _extra_sources(recipe)
    )
    library = _install(recipe, framework, build_dir, folder, settings.tritonserver_library)
    Provenance(name, recipe.library, framework.distribution, framework.version, gpu, key).write(
        folder
    )
    log(f"{name}: built {library} in {time.monotonic() - started:.0f} s")
    return library


def compile_backend(
    name: str,
    source: str | Path,
    target: str,
    args: list[str],
    settings: BuildSettings,
    gpu: bool = False,
    extra_sources: list[str] | None = None,
) -> Path:
    """Unpack the pinned r24.10 core/common/backend (and ``source`` where it names a pinned
    archive; a folder is used as it is), patch them, configure with CMake + Ninja and build
    ``target``; the build folder."""
    named = [] if isinstance(source, Path) else [source]
    trees = sources.fetch(
        [*SHARED_SOURCES, *named, *(extra_sources or [])],
        settings.work / "src",
        settings.archives,
    )
    patches.apply(settings.work / "src", list(trees), gpu)
    source_dir = source if isinstance(source, Path) else trees[source]
    build_dir = settings.work / f"build-{name}"
    shutil.rmtree(build_dir, ignore_errors=True)
    _run(
        ["cmake", "-G", "Ninja", "-S", str(source_dir), "-B", str(build_dir), *args],
        f"configure {name}",
        settings.work / f"{name}-configure.log",
    )
    jobs = ["-j", str(settings.jobs)] if settings.jobs else []
    _run(
        ["cmake", "--build", str(build_dir), "--target", target, *jobs],
        f"compile {name}",
        settings.work / f"{name}-compile.log",
    )
    return build_dir


def shared_cmake_args(work: Path, gpu: bool) -> list[str]:
    """What every backend's CMake needs: release flags and the local r24.10 sources."""
    src = work / "src"
    return [
        "-DCMAKE_BUILD_TYPE=Release",
        # The sources build with -Werror; newer compilers than NVIDIA's (g++ 13) warn where
        # 24.10's did not (a maybe-uninitialized in onnxruntime.cc, rapidjson's std::iterator).
        "-DCMAKE_CXX_FLAGS=-Wno-error=maybe-uninitialized -Wno-error=deprecated-declarations",
        "-DFETCHCONTENT_FULLY_DISCONNECTED=ON",
        f"-DFETCHCONTENT_SOURCE_DIR_REPO-COMMON={src / 'common'}",
        f"-DFETCHCONTENT_SOURCE_DIR_REPO-CORE={src / 'core'}",
        f"-DFETCHCONTENT_SOURCE_DIR_REPO-BACKEND={src / 'backend'}",
        f"-DTRITON_ENABLE_GPU={'ON' if gpu else 'OFF'}",
    ]


def install_library(
    built: Path,
    target: Path,
    server_library: str | None,
    rpath: Path,
    replace_needed: tuple[str, str] | None = None,
    add_needed: tuple[str, ...] = (),
) -> Path:
    """Copy ``built`` to ``target`` (a real file: Triton refuses a backend library whose real
    path is outside its folder), made to NEED the wheel's renamed ``libtritonserver`` and to
    find the framework's libraries by ``rpath``. ``add_needed``: libraries the framework's own
    library needs but cannot find itself (no rpath of its own; ``rpath`` here is not
    inherited), loaded first by name so they are there when it is."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(built, target)
    if server_library:
        _run(
            ["patchelf", "--replace-needed", "libtritonserver.so", server_library, str(target)],
            "patchelf",
        )
    if replace_needed:
        _run(["patchelf", "--replace-needed", *replace_needed, str(target)], "patchelf")
    for name in add_needed:
        _run(["patchelf", "--add-needed", name, str(target)], "patchelf")
    # Separate calls: patchelf 0.14 mixed up --replace-needed and --set-rpath given together.
    _run(["patchelf", "--set-rpath", str(rpath), str(target)], "patchelf")
    return target


def _gpu_mode(recipe: BackendRecipe, framework: Framework, wanted: bool | None) -> bool:
    """The onnxruntime wheel here is CPU-only; the pytorch backend follows its torch wheel."""
    if recipe.framework != "torch":
        return False
    cuda = frameworks.torch_cuda_version(framework)
    if wanted and cuda is None:
        raise NativeBackendError("--gpu on needs a CUDA build of torch; this torch is CPU-only")
    return bool(cuda) if wanted is None else wanted


def _extra_sources(recipe: BackendRecipe) -> list[str]:
    return ["onnxruntime-c-api-1.29"] if recipe.framework == "onnxruntime" else []


def _cmake_args(recipe: BackendRecipe, framework: Framework, gpu: bool, work: Path) -> list[str]:
    src = work / "src"
    args = shared_cmake_args(work, gpu)
    if recipe.framework == "onnxruntime":
        return [
            *args,
            f"-DTRITON_ONNXRUNTIME_INCLUDE_PATHS={src / 'onnxruntime-c-api-1.29' / 'include'}",
            f"-DTRITON_ONNXRUNTIME_LIB_PATHS={work / 'ort-lib'}",
        ]
    include = framework.package_dir / "include"
    return [
        *args,
        # torch 2.12+ headers need C++20.
        "-DTRITON_MIN_CXX_STANDARD=20",
        "-DTRITON_PYTORCH_ENABLE_TORCHVISION=OFF",
        "-DTRITON_PYTORCH_ENABLE_TORCHTRT=OFF",
        f"-DTRITON_PYTORCH_INCLUDE_PATHS={include};{include / 'torch/csrc/api/include'}",
        f"-DTRITON_PYTORCH_LIB_PATHS={framework.lib_dir}",
    ]


def _recipe_key(
    recipe: BackendRecipe,
    framework: Framework,
    gpu: bool,
    args: list[str],
    server_library: str | None,
) -> str:
    content = {
        "recipe": asdict(recipe),
        "sources": {name: s.commit for name, s in sorted(sources.SOURCES.items())},
        "patches": [asdict(p) for group in patches.PATCHES.values() for p in group],
        "framework": [framework.distribution, framework.version, str(framework.package_dir)],
        "gpu": gpu,
        "cmake": args,
        "tritonserver_library": server_library,
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _link_unversioned(library: Path, folder: Path) -> None:
    """find_library wants ``libonnxruntime.so``; the wheel ships only the versioned file."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("libonnxruntime.so", "libonnxruntime.so.1"):
        link = folder / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(library)


def _install(
    recipe: BackendRecipe,
    framework: Framework,
    build_dir: Path,
    folder: Path,
    server_library: str | None,
) -> Path:
    replace = None
    if recipe.framework == "onnxruntime":
        versioned = frameworks.onnxruntime_library(framework).name
        replace = ("libonnxruntime.so.1", versioned)
    return install_library(
        build_dir / recipe.library,
        folder / recipe.library,
        server_library,
        framework.lib_dir,
        replace,
    )


def _run(command: list[str], step: str, log: Path | None = None) -> None:
    """Run one build command; on failure say which lines were errors (a compile's warnings
    fill its last lines) and where the whole output is."""
    result = subprocess.run(command, capture_output=True, text=True)
    output = result.stdout + result.stderr
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(output)
    if result.returncode != 0:
        lines = output.strip().splitlines()
        errors = [line for line in lines if "error" in line.lower()][:20] or lines[-30:]
        where = f"; full output: {log}" if log else ""
        raise NativeBackendError(
            f"{step} failed ({' '.join(command[:3])} ...){where}:\n" + "\n".join(errors)
        )

"""docker-compose.yml, the Dockerfiles and the container-side Python, checked without Docker.

The compose file is validated by a real parser (Debian's docker-compose); the Dockerfiles by
hadolint; everything the images run by vermin against the container's Python 3.10, and by
the imports each image needs against what its Dockerfile copies and installs.
Tools come from `scripts/install-system-deps.sh`; a missing one skips with that hint, or
fails under CI, where the script is expected to have run.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.prerequisites import PROJECT_ROOT, require_tool

ROOT = PROJECT_ROOT
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKER_DIR = ROOT / "docker"
TRITON_BASE = "nvcr.io/nvidia/tritonserver:24.10-py3"
CONTAINER_PYTHON = "3.10"
LOCUSTFILE = "triton_kit/loadtest/locustfile.py"
SERVER_SERVICES = {"gpu": ("build-engines", "triton"), "cpu": ("build-onnx", "triton-cpu")}
ALWAYS_ON = ("front-door", "locust-master", "locust-worker", "prometheus", "grafana")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    # The compose file requires its two secrets from the environment (issue 12).
    env = {**os.environ, "GRAFANA_ADMIN_PASSWORD": "test", "TRITON_KIT_API_KEY": "test"}
    return subprocess.run(
        args, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=env
    )


# -- the compose file, through the real parser ----------------------------------------------


@pytest.fixture(scope="module")
def resolved() -> dict[str, Any]:
    """docker-compose's own resolution of the file, with both profiles enabled."""
    compose = require_tool("docker-compose")
    result = run(compose, "-f", str(COMPOSE_FILE), "--profile", "gpu", "--profile", "cpu", "config")
    assert result.returncode == 0, f"docker-compose config rejected the file:\n{result.stderr}"
    return yaml.safe_load(result.stdout)


def _target(port: dict[str, Any] | str) -> int:
    """Container port of a resolved mapping: docker-compose 1.29 prints "ip:host:container"
    strings when a host address is bound, and dicts otherwise."""
    return (
        int(port["target"])
        if isinstance(port, dict)
        else int(str(port).rsplit(":", 1)[1].split("/")[0])
    )


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def test_compose_file_is_valid_for_each_profile() -> None:
    compose = require_tool("docker-compose")
    for profile in (*SERVER_SERVICES, None):
        args = ["--profile", profile] if profile else []
        result = run(compose, "-f", str(COMPOSE_FILE), *args, "config", "--quiet")
        assert result.returncode == 0, f"profile {profile}: {result.stderr}"


def test_expected_services_and_profiles(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    expected = {name for pair in SERVER_SERVICES.values() for name in pair} | set(ALWAYS_ON)
    assert set(services) == expected
    for profile, names in SERVER_SERVICES.items():
        for name in names:
            assert services[name].get("profiles") == [profile], name
    for name in ALWAYS_ON:
        assert "profiles" not in services[name], f"{name} must run with either server profile"


def _gpu_reserved(service: dict[str, Any]) -> bool:
    devices = service.get("deploy", {}).get("resources", {}).get("reservations", {})
    return any(
        d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", [])
        for d in devices.get("devices", [])
    )


def _build_base(service: dict[str, Any]) -> str:
    return service["build"]["args"]["TRITON_IMAGE"]


@pytest.mark.parametrize("name", ["triton", "triton-cpu"])
def test_triton_serves_the_repository_read_only(resolved: dict[str, Any], name: str) -> None:
    triton = resolved["services"][name]
    assert _build_base(triton) == TRITON_BASE
    assert triton["build"]["dockerfile"] == "docker/triton.Dockerfile"
    # Clients reach 8000/8001 only through the front door; metrics stay direct.
    assert {_target(p) for p in triton["ports"]} == {8002}
    mounts = {v.split(":")[1]: v for v in triton["volumes"]}
    assert mounts["/models"].endswith("/model_repository:/models:ro"), mounts
    assert "--model-repository=/models" in " ".join(triton["command"])
    assert "/v2/health/ready" in " ".join(triton["healthcheck"]["test"])
    assert triton["shm_size"] == "1gb", "the python backend needs more than 64 MB of /dev/shm"


def _published(port: dict[str, Any] | str) -> tuple[str, int]:
    """(host address, container port) of a resolved mapping."""
    if isinstance(port, dict):
        return str(port.get("host_ip", "")), int(port["target"])
    return str(port).split(":", 1)[0], _target(port)


def test_front_door_publishes_the_client_ports_on_loopback(resolved: dict[str, Any]) -> None:
    """nginx (deploy/nginx/templates/) takes Triton's HTTP and gRPC ports, bound to
    BIND_ADDRESS (loopback by default), and is set from the template's own names."""
    from triton_kit.server import front_door

    door = resolved["services"]["front-door"]
    assert sorted(_published(p) for p in door["ports"]) == [
        ("127.0.0.1", 8000),
        ("127.0.0.1", 8001),
    ]
    image = door["image"]
    assert image.startswith("nginx:") and not image.endswith(":latest"), image
    assert any(
        v.endswith("/deploy/nginx/templates:/etc/nginx/templates:ro") for v in door["volumes"]
    ), door["volumes"]
    assert front_door.TEMPLATE.parent.name == "templates"
    env = door["environment"]
    assert set(front_door.names(front_door.TEMPLATE.read_text())) <= set(env)
    assert {k: env[k] for k in front_door.DEFAULTS} == front_door.DEFAULTS
    assert "/v2/health/ready" in " ".join(door["healthcheck"]["test"])


def compose_stop_path(service: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The tokens of the server's `sh -c` command and its environment, with the command
    asserted to run tritonserver under docker/drain-on-stop.sh."""
    shell, flag, script = service["command"]
    assert [shell, flag] == ["sh", "-c"]
    tokens = shlex.split(script.replace("$(", "").replace(")", ""))
    assert tokens[:3] == ["exec", "/opt/triton-kit/docker/drain-on-stop.sh", "tritonserver"]
    return tokens[3:], service.get("environment", {})


@pytest.mark.parametrize("name", ["triton", "triton-cpu"])
def test_stop_drains_within_the_grace_period(resolved: dict[str, Any], name: str) -> None:
    """`docker compose stop` SIGTERMs the entrypoint, which drains (needing explicit model
    control and the key) then SIGTERMs Triton; SIGKILL follows stop_grace_period later."""
    args, env = compose_stop_path(resolved["services"][name])
    flags = dict(a.split("=", 1) for a in args if a.startswith("--") and "=" in a)
    assert flags["--model-control-mode"] == "explicit" and flags["--load-model"] == "*"
    assert env["TRITON_KIT_API_KEY"] == "test", "the drain's unload calls need the key"
    assert "triton-kit-api-key=test" in flags["--http-restricted-api"]
    drain_s, exit_s = float(env["TRITON_KIT_DRAIN_TIMEOUT_S"]), int(flags["--exit-timeout-secs"])
    grace = resolved["services"][name]["stop_grace_period"]
    assert re.fullmatch(r"\d+s", grace), grace
    assert int(grace[:-1]) > drain_s + exit_s


def test_serving_image_builds_the_ctranslate2_backend_the_default_nmt_needs() -> None:
    """The default repository's nmt is the kit's ctranslate2 backend in its text mode, which the
    official image lacks: a stage builds it with the kit's own recipe against the wheel release
    its headers are (the pin the build refuses to differ from) and with libsentencepiece-dev (the
    text mode), and the image installs it where Triton looks for backends, its libraries,
    libsentencepiece among them, beside it."""
    from triton_kit.server.native_backends.ct2_backend import HEADERS_RELEASE

    dockerfile = (DOCKER_DIR / "triton.Dockerfile").read_text()
    stage, final = dockerfile.split("FROM ${TRITON_IMAGE} AS ctranslate2-backend", 1)[1].split(
        "\nFROM ${TRITON_IMAGE}\n", 1
    )
    assert "python3 -m triton_kit.server.native_backends build ctranslate2" in stage
    assert f'"ctranslate2=={HEADERS_RELEASE}"' in stage
    assert f'"ctranslate2=={HEADERS_RELEASE}"' in (ROOT / "pyproject.toml").read_text()
    assert "patchelf --set-rpath '$ORIGIN'" in stage
    assert "libsentencepiece-dev pkg-config" in stage
    assert 'libsentencepiece.so.0" /build/out/ctranslate2/' in stage
    assert (
        "COPY --from=ctranslate2-backend /build/out/ctranslate2 "
        "/opt/tritonserver/backends/ctranslate2" in final
    )


def test_serving_image_carries_the_stop_path() -> None:
    """The entrypoint and server.drain with its one project import, copied where the
    command and PYTHONPATH=/opt/triton-kit find them; no third-party imports."""
    dockerfile = (DOCKER_DIR / "triton.Dockerfile").read_text()
    assert "COPY docker/drain-on-stop.sh /opt/triton-kit/docker/drain-on-stop.sh" in dockerfile
    assert (
        "COPY triton_kit/server/drain.py triton_kit/server/security.py "
        "/opt/triton-kit/triton_kit/server/" in dockerfile
    )
    assert _imports(ROOT / "triton_kit/server/drain.py", lazy=True) == {"triton_kit/server"}
    assert _imports(ROOT / "triton_kit/server/security.py", lazy=True) == set()
    assert os.access(DOCKER_DIR / "drain-on-stop.sh", os.X_OK)


def test_gpu_profile_builds_engines_first_with_the_server_image(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    build, triton = services["build-engines"], services["triton"]
    assert _gpu_reserved(build) and _gpu_reserved(triton)
    assert _build_base(build) == _build_base(triton), "TensorRT must match: same base image"
    assert build["command"][:3] == ["all", "--engine", "tensorrt"]
    assert "/models" in build["command"]
    assert any(v.endswith("/model_repository:/models:rw") for v in build["volumes"])
    assert build.get("restart") == "no", "a one-shot service must not restart"
    assert triton["depends_on"] == {
        "build-engines": {"condition": "service_completed_successfully"}
    }


def test_cpu_profile_needs_no_gpu_and_answers_as_triton(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    build, triton = services["build-onnx"], services["triton-cpu"]
    assert not _gpu_reserved(build) and not _gpu_reserved(triton)
    assert "tensorrt" not in build["command"]
    assert triton["depends_on"] == {"build-onnx": {"condition": "service_completed_successfully"}}
    assert "triton" in triton["networks"]["default"]["aliases"]


@pytest.mark.parametrize(
    ("name", "engines"),
    [
        ("build-engines", {"resnet50": "tensorrt", "bert": "tensorrt", "nmt": "tensorrt"}),
        # Each family's default: nmt's is CTranslate2, its text mode (the serving image builds
        # the backend with sentencepiece).
        ("build-onnx", {"resnet50": "onnxruntime", "bert": "onnxruntime", "nmt": "ctranslate2"}),
    ],
)
def test_build_commands_parse_with_the_real_cli(
    resolved: dict[str, Any], name: str, engines: dict[str, str]
) -> None:
    """The one-shot services' arguments are accepted by `python -m triton_kit.build_engines`
    itself, and give each family the engine its served models need."""
    from triton_kit.build_engines.cli import ALL_ORDER, build_parser, family_engine, family_options
    from triton_kit.build_engines.flags import parse_build_args

    command = resolved["services"][name]["command"]
    parser = build_parser()
    try:
        args = parser.parse_args(command)
    except SystemExit as exc:
        pytest.fail(f"python -m triton_kit.build_engines rejects {command}: exit {exc.code}")
    assert (args.family, str(args.output_repository)) == ("all", "/models")
    built = {}
    for family in ALL_ORDER:  # as `all` runs them: each family's own flags and defaults
        family_args = parse_build_args(parser, [family, *command[1:]], family_engine)
        built[family] = family_options(family, family_args).engine.value
    assert built == engines


def test_locust_master_and_scalable_workers(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    master, worker = services["locust-master"], services["locust-worker"]
    assert [_target(p) for p in master["ports"]] == [8089]
    assert LOCUSTFILE in " ".join(master["entrypoint"])
    assert "http://triton:8000/v2/health/ready" in " ".join(master["entrypoint"])
    assert master["environment"]["LOCUST_HOST"].split("://")[1].startswith("triton:")
    assert "healthcheck" in master
    # --scale needs no fixed name and no published port.
    assert "container_name" not in worker and "ports" not in worker
    assert worker["command"][:3] == ["--worker", "--master-host", "locust-master"]
    assert worker["depends_on"] == {"locust-master": {"condition": "service_healthy"}}
    assert LOCUSTFILE in (DOCKER_DIR / "locust.Dockerfile").read_text()


def test_the_locustfile_the_services_run_exists() -> None:
    assert (ROOT / LOCUSTFILE).exists(), f"locust-master and locust-worker run {LOCUSTFILE}"


def test_monitoring_services(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    prometheus, grafana = services["prometheus"], services["grafana"]
    assert any(
        v.endswith("/deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro")
        for v in prometheus["volumes"]
    )
    assert grafana["depends_on"] == {"prometheus": {"condition": "service_healthy"}}
    mounts = {v.split(":")[1] for v in grafana["volumes"]}
    assert {"/etc/grafana/provisioning", "/etc/grafana/dashboards"} <= mounts
    for name in ("prometheus", "grafana"):
        image = services[name]["image"]
        assert ":" in image and not image.endswith(":latest"), f"{name} image must be pinned"


def test_long_running_services_have_healthchecks(resolved: dict[str, Any]) -> None:
    for name in ("triton", "triton-cpu", "front-door", "locust-master", "prometheus", "grafana"):
        check = resolved["services"][name].get("healthcheck", {})
        assert check.get("test"), f"{name} has no healthcheck"


def test_no_absolute_host_paths(raw: dict[str, Any]) -> None:
    named = set(raw.get("volumes") or {})
    for name, service in raw["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source.startswith("./") or source in named, f"{name}: {volume}"
        context = service.get("build", {}).get("context", ".")
        assert not Path(context).is_absolute(), f"{name}: build context {context}"


def test_grafana_provisioning_matches_the_compose_mounts() -> None:
    datasource = yaml.safe_load(
        (ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text()
    )["datasources"][0]
    provider = yaml.safe_load(
        (ROOT / "deploy/grafana/provisioning/dashboards/triton.yml").read_text()
    )["providers"][0]
    assert datasource["url"] == "http://prometheus:9090"
    assert provider["options"]["path"] == "/etc/grafana/dashboards"
    dashboard = (ROOT / "deploy/grafana/dashboards/triton.json").read_text()
    uids = set(re.findall(r'"uid":\s*"([^"]+)"', dashboard)) - {"triton-kit"}
    assert uids == {datasource["uid"]}, "panels must use the provisioned datasource uid"


# -- Dockerfiles -----------------------------------------------------------------------------

DOCKERFILES = sorted(DOCKER_DIR.glob("*.Dockerfile"))


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_passes_hadolint(dockerfile: Path) -> None:
    hadolint = require_tool("hadolint")
    result = run(hadolint, "--no-color", str(dockerfile))
    assert result.returncode == 0, result.stdout + result.stderr


def _copy_sources(dockerfile: Path) -> list[str]:
    sources: list[str] = []
    for line in dockerfile.read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == "COPY" and not any(p.startswith("--from") for p in parts):
            sources += [p for p in parts[1:-1] if not p.startswith("--")]
    return sources


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_copies_exist_and_pass_its_dockerignore(dockerfile: Path) -> None:
    ignore = dockerfile.with_name(dockerfile.name + ".dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore, "the context should exclude everything it does not copy (.venv!)"
    for source in _copy_sources(dockerfile):
        assert (ROOT / source).exists(), f"{dockerfile.name} copies missing {source}"
        parts = source.split("/")
        allowed_here = any("/".join(parts[:n]) in allowed for n in range(1, len(parts) + 1))
        assert allowed_here, f"{source} is excluded from the build context"


@pytest.mark.parametrize("dockerfile", ["triton.Dockerfile", "build-engines.Dockerfile"])
def test_server_images_use_the_pinned_triton_base(dockerfile: str) -> None:
    text = (DOCKER_DIR / dockerfile).read_text()
    assert f"ARG TRITON_IMAGE={TRITON_BASE}" in text
    assert "FROM ${TRITON_IMAGE}" in text


# -- Python that runs in the containers ------------------------------------------------------


def _container_python_files() -> list[Path]:
    files = list((ROOT / "triton_kit/python_models").rglob("*.py"))
    files += list((ROOT / "model_repository").glob("*/*/model.py"))
    files += list(DOCKER_DIR.glob("*.py"))
    files += [
        ROOT / "triton_kit/server/drain.py",
        ROOT / "triton_kit/server/security.py",
    ]  # the stop path
    return sorted(f for f in files if "__pycache__" not in f.parts)


def test_container_python_runs_on_python_310() -> None:
    files = _container_python_files()
    assert any(f.parent.name == "python_models" for f in files)
    for path in files:
        ast.parse(path.read_text(), filename=str(path), feature_version=(3, 10))
    vermin = require_tool("vermin")
    result = run(
        vermin, "-q", "--no-tips", "--violations", f"-t={CONTAINER_PYTHON}-", *map(str, files)
    )
    assert result.returncode == 0, f"needs Python > {CONTAINER_PYTHON}:\n{result.stdout}"


@dataclass(frozen=True)
class Image:
    dockerfile: str
    requirements: str
    # Imports that the image provides some other way, with the reason.
    provided: dict[str, str] = field(default_factory=dict)
    # Packages whose every import runs in the image, lazy ones included (the served code);
    # elsewhere imports inside functions are optional paths and not required.
    served: tuple[str, ...] = ()


IMAGES = [
    Image(
        "triton.Dockerfile",
        "requirements-triton.txt",
        {
            "triton_python_backend_utils": "the python backend",
            # Paths used only where torch is installed (24.10's python backend has none): the
            # image pre-processors' GPU decode (PIL without it), nmt's TorchScript steps and the
            # CUDA-graph python model, which --engine torch builds write for a GPU host.
            "torch": "optional: GPU pre-processing, nmt --engine torch, CUDA-graph models",
            "torchvision": "optional: nvJPEG decode only where it imports",
        },
        served=("triton_kit/python_models",),
    ),
    Image(
        "build-engines.Dockerfile",
        "requirements-build.txt",
        {"tensorrt": "installed with a version check by the Dockerfile"},
    ),
    Image("locust.Dockerfile", "requirements-loadtest.txt"),
]
# The kit's subpackages as the Dockerfiles copy them: triton_kit/<name>.
PROJECT_PACKAGES = {f"triton_kit/{p.parent.name}" for p in ROOT.glob("triton_kit/*/__init__.py")}


def _imports(path: Path, *, lazy: bool) -> set[str]:
    """Top-level modules ``path`` imports (``triton_kit/<name>`` for the kit's own); in functions
    or under ImportError only if ``lazy``."""
    found: set[str] = set()

    def visit(nodes: Iterable[ast.AST]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(_top_level(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(_top_level(node.module))
            if lazy:
                visit(ast.iter_child_nodes(node))
            elif isinstance(node, ast.Try) and _guards_import(node):
                visit([*node.handlers, *node.orelse, *node.finalbody])
            elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(ast.iter_child_nodes(node))

    visit(ast.parse(path.read_text()).body)
    return found - set(sys.stdlib_module_names) - {"__future__"}


def _top_level(module: str) -> str:
    parts = module.split(".")
    return "/".join(parts[:2]) if parts[0] == "triton_kit" and len(parts) > 1 else parts[0]


def _guards_import(node: ast.Try) -> bool:
    """``try: import x / except ImportError:`` marks ``x`` optional."""
    names = {"ImportError", "ModuleNotFoundError"}
    for handler in node.handlers:
        caught = handler.type
        elements = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if caught is None or any(isinstance(e, ast.Name) and e.id in names for e in elements):
            return True
    return False


def _requirement_names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.add(_canonical(re.split(r"[\[<>=!~; ]", line, maxsplit=1)[0]))
    return names


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _ignored_folders(dockerfile: Path) -> tuple[str, ...]:
    """The plain paths a Dockerfile's .dockerignore leaves out of the context."""
    ignore = dockerfile.with_name(dockerfile.name + ".dockerignore").read_text().splitlines()
    return tuple(
        line.rstrip("/") + "/"
        for line in ignore
        if line and not line.startswith(("#", "!")) and "*" not in line
    )


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.dockerfile)
def test_image_installs_what_its_code_imports(image: Image) -> None:
    """Every import of the copied packages is copied too, pip-installed, or provided."""
    copied = {s.rstrip("/") for s in _copy_sources(DOCKER_DIR / image.dockerfile)}
    ignored = _ignored_folders(DOCKER_DIR / image.dockerfile)
    packages = sorted(copied & PROJECT_PACKAGES)
    assert packages, f"{image.dockerfile} copies no project package"
    requirements = _requirement_names(DOCKER_DIR / image.requirements)
    distributions = packages_distributions()
    problems = []
    for package in packages:
        lazy = package in image.served
        for path in sorted((ROOT / package).rglob("*.py")):
            if str(path.relative_to(ROOT)).startswith(ignored):
                continue
            for module in sorted(_imports(path, lazy=lazy) - set(image.provided)):
                where = path.relative_to(ROOT)
                if module in PROJECT_PACKAGES:
                    if module not in copied:
                        problems.append(f"{where}: imports {module}/, not copied")
                    continue
                dists = {_canonical(d) for d in distributions.get(module, [])}
                if not dists & requirements:
                    problems.append(f"{where}: imports {module} ({dists or 'unknown'})")
    assert not problems, f"{image.requirements} / COPY lacks:\n" + "\n".join(problems)

"""Compose and images are locked down by default (items 14-16), read from the files themselves."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.support.prerequisites import PROJECT_ROOT

pytestmark = pytest.mark.reliability
ROOT = PROJECT_ROOT
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _services() -> dict[str, dict]:
    return COMPOSE["services"]


def test_every_published_port_binds_loopback_by_default() -> None:
    for name, service in _services().items():
        for port in service.get("ports", []):
            assert str(port).startswith("${BIND_ADDRESS:-127.0.0.1}:"), (name, port)


def test_grafana_needs_a_password_from_the_environment_and_no_anonymous_access() -> None:
    env = _services()["grafana"]["environment"]
    assert re.fullmatch(r"\$\{GRAFANA_ADMIN_PASSWORD:\?[^}]*\}", env["GF_SECURITY_ADMIN_PASSWORD"])
    assert env.get("GF_AUTH_ANONYMOUS_ENABLED", "false") == "false"


def test_compose_triton_restricts_the_dangerous_endpoints() -> None:
    from triton_kit.server.security import API_KEY_HEADER, RESTRICTED_APIS

    command = " ".join(COMPOSE["x-triton-server"]["command"])
    apis = ",".join(RESTRICTED_APIS)
    for flag in ("--http-restricted-api", "--grpc-restricted-protocol"):
        assert f"{flag}={apis}:{API_KEY_HEADER}=${{TRITON_KIT_API_KEY:?" in command, flag


def test_serving_image_runs_as_non_root() -> None:
    users = re.findall(r"^USER\s+(\S+)", (ROOT / "docker/triton.Dockerfile").read_text(), re.M)
    assert users and users[-1] not in ("root", "0", "0:0"), users

"""Render the front door's nginx config (deploy/nginx/templates/) as the nginx image does.

The official image's entrypoint runs ``envsubst`` over ``/etc/nginx/templates/*.template``
with the names set in the container's environment; :func:`render` does the same with
``values``, and refuses a template name with no value (envsubst would leave it, and nginx
would fail on it later). ``python -m triton_kit.server.front_door NAME=VALUE ...`` prints the
config, e.g. for a host nginx in front of ``make serve``.
"""

from __future__ import annotations

import re
import string
import sys
from collections.abc import Mapping
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy/nginx/templates/default.conf.template"
# What docker-compose.yml sets; the Kubernetes sidecar points the upstreams at 127.0.0.1.
DEFAULTS: dict[str, str] = {
    "TRITON_KIT_MAX_REQUEST_BODY": "24m",
    "FRONT_HTTP_LISTEN": "8000",
    "FRONT_GRPC_LISTEN": "8001",
    "TRITON_HTTP_UPSTREAM": "triton:8000",
    "TRITON_GRPC_UPSTREAM": "triton:8001",
    "TRITON_KIT_RESOLVER": "127.0.0.11",
}
_NAME = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}")


def names(text: str) -> set[str]:
    """The ``${NAME}`` settings a template uses (nginx's own variables are lower case)."""
    return set(_NAME.findall(text))


def substitute(text: str, values: Mapping[str, str]) -> str:
    missing = names(text) - set(values)
    if missing:
        raise KeyError(f"the front door's template needs values for {sorted(missing)}")
    return string.Template(text).safe_substitute(values)


def render(values: Mapping[str, str], template: Path = TEMPLATE) -> str:
    return substitute(template.read_text(), values)


def main(argv: list[str]) -> int:
    overrides = dict(arg.split("=", 1) for arg in argv)
    sys.stdout.write(render({**DEFAULTS, **overrides}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

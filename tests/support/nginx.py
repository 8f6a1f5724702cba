"""Run Debian's nginx on a rendered front-door config (deploy/nginx/templates/), as root or not.

The main config keeps every path (pid, logs, temp files) under one directory, and runs the
workers as the calling user so that they can read it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

from tests.support.prerequisites import require_tool

MAIN_CONFIG = """
daemon off;
user {user};
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log {root}/access.log;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    include {root}/front.conf;
}}
"""


def nginx_binary() -> str:
    # Debian installs nginx in /usr/sbin, which a non-root PATH may lack.
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"])
    return shutil.which("nginx", path=path) or require_tool("nginx")


def configure(root: Path, server_config: str) -> list[str]:
    """nginx's arguments to serve ``server_config`` (http-context text) from ``root``, which
    is created; ``nginx -t`` must accept it."""
    root.mkdir()
    (root / "front.conf").write_text(server_config)
    user = pwd.getpwuid(os.geteuid()).pw_name
    (root / "nginx.conf").write_text(MAIN_CONFIG.format(root=root, user=user))
    conf, log = root / "nginx.conf", root / "error.log"
    args = [nginx_binary(), "-p", str(root), "-c", str(conf), "-e", str(log)]
    check = subprocess.run([*args, "-t"], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr
    return args

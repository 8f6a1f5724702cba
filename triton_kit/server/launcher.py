"""Start, wait for and stop a tritonserver process (in the spirit of pytriton's wrapper)."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from triton_kit.server.binary import (
    PROJECT_ROOT,
    TritonInstallation,
    assemble_backend_dir,
    find_installation,
    missing_native_backends,
    server_environment,
)
from triton_kit.server.drain import CONTROL_ARGS, Drainer
from triton_kit.server.errors import (
    BackendUnavailableError,
    ModelLoadError,
    PortInUseError,
    ServerExitedError,
    StartupTimeoutError,
)
from triton_kit.server.model_backends import backend_table, native_backends_needed
from triton_kit.server.plan_check import check_plans
from triton_kit.server.security import api_key_from_env, api_key_headers, restricted_api_args
from triton_kit.server.shm import new_prefix, prefix_args, remove_orphans, remove_regions

# Triton's p50/p90/p95/p99 summaries beside the cumulative counters. Off unless asked for:
# they cost 42% of ResNet-50's throughput under load on the H100 (issue 30's table: 7,627 ->
# 4,408 img/s at c256, this flag alone). Only Grafana's quantile panels read them; means come
# from the counters. docker-compose.yml and deploy/k8s, which ship that dashboard, turn them on.
LATENCY_SUMMARY_ARGS = ["--metrics-config=summary_latencies=true"]
_LOAD_FAILURE = re.compile(r"failed to load '(?P<model>[^']+)' version \d+: (?P<reason>.*)$")
_TABLE_FAILURE = re.compile(
    r"^\|\s*(?P<model>\S+)\s*\|\s*\d+\s*\|\s*UNAVAILABLE: (?P<reason>.*?)\s*\|$"
)


@dataclass
class ServerConfig:
    """How to run tritonserver. Ports of 0 are replaced by free ones at start."""

    model_repository: Path = PROJECT_ROOT / "model_repository"
    host: str = "127.0.0.1"
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    startup_timeout_s: float = 180.0
    exit_timeout_s: int = 10
    log_file: Path | None = None
    log_verbose: int = 0
    # Triton's latency quantiles on /metrics (LATENCY_SUMMARY_ARGS says what they cost).
    latency_summaries: bool = False
    # Key for the restricted endpoints (triton_kit/server/security.py); None: $TRITON_KIT_API_KEY
    # or random.
    api_key: str | None = None
    extra_args: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.model_repository = Path(self.model_repository)
        if self.log_file is not None:
            self.log_file = Path(self.log_file)


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct free ports: each socket stays bound until all are chosen, since two
    ``free_port()`` calls in a row may return the same port (Triton then refuses to start)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(sock.getsockname()[1])
        return ports


def check_port_free(host: str, port: int, purpose: str) -> None:
    """Refuse a port someone listens on; accept one held only by TIME-WAIT sockets.

    SO_REUSEADDR is what tritonserver itself binds with, so a restart right after
    a kill or a stop under load succeeds as soon as the old process is gone.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUseError(
                    f"{purpose} port {port} on {host} is already in use; stop the other "
                    f"process or choose another port (e.g. {purpose.upper()}_PORT=...)"
                ) from exc
            raise


def http_ready(http_url: str, timeout_s: float = 2.0) -> bool:
    """Whether Triton at ``http_url`` answers its readiness probe with 200."""
    try:
        with urllib.request.urlopen(f"{http_url}/v2/health/ready", timeout=timeout_s) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_ready(
    http_url: str,
    timeout_s: float,
    poll_s: float = 0.3,
    *,
    process: subprocess.Popen | None = None,
) -> bool:
    """Poll the readiness probe of a server someone else started; False after ``timeout_s``,
    or at once when ``process`` (that server) has exited: a server that failed to load its
    models exits, and waiting out the timeout on it cost two GPU runs their budget."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if http_ready(http_url, timeout_s=1.0):
            return True
        if process is not None and process.poll() is not None:
            return False
        time.sleep(poll_s)
    return False


def _die_with_parent() -> None:
    """Runs in the child: the kernel SIGKILLs the server if the launching process dies.

    SIGKILL, not SIGTERM: a SIGTERM'd tritonserver whose launcher is gone waited
    out its exit timeout, then aborted in malloc and hung as an orphan with 370
    threads. Its shared-memory regions are removed at the next start.
    """
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def parse_load_failures(log_text: str) -> dict[str, str]:
    """Triton's per-model load errors, from its log, keyed by model name."""
    failures: dict[str, str] = {}
    for line in log_text.splitlines():
        line = line.rstrip()
        match = _LOAD_FAILURE.search(line) or _TABLE_FAILURE.match(line)
        if match:
            failures.setdefault(match["model"], match["reason"].strip().rstrip('"'))
    return failures


def _missing_text_mode(backends: Path, repository: Path, missing: dict[str, str]) -> dict[str, str]:
    """``{"ctranslate2": reason}`` where the repository has text-mode models (the default
    ``nmt``) and the ctranslate2 backend in ``backends`` was built without sentencepiece:
    refused before the start, rather than the model failing to load."""
    from triton_kit.server.model_backends import ct2_text_models
    from triton_kit.server.native_backends.ct2_backend import (
        CT2_BACKEND,
        LIBRARY,
        has_text_mode,
        text_mode_missing,
    )

    library = backends / CT2_BACKEND / LIBRARY
    if CT2_BACKEND in missing or not library.is_file():
        return {}
    models = ct2_text_models(repository)
    if not models or has_text_mode(library):
        return {}
    return {CT2_BACKEND: text_mode_missing(library, models)}


class TritonServer:
    """A running tritonserver; use as a context manager so it always stops."""

    def __init__(self, config: ServerConfig | None = None) -> None:
        self.config = config or ServerConfig()
        self._process: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self.shm_prefix = new_prefix()
        self.api_key = self.config.api_key or api_key_from_env()
        self.installation: TritonInstallation | None = None
        self._ready_once = False

    # -- addresses ---------------------------------------------------------
    @property
    def http_url(self) -> str:
        return f"http://{self.config.host}:{self.config.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"grpc://{self.config.host}:{self.config.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.config.host}:{self.config.metrics_port}/metrics"

    @property
    def log_file(self) -> Path:
        assert self.config.log_file is not None
        return self.config.log_file

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> TritonServer:
        cfg = self.config
        check_plans(Path(cfg.model_repository))
        self._assign_ports()
        for purpose, port in (
            ("http", cfg.http_port),
            ("grpc", cfg.grpc_port),
            ("metrics", cfg.metrics_port),
        ):
            check_port_free(cfg.host, port, purpose)
        self.installation = find_installation()
        remove_orphans()
        self._workdir = Path(tempfile.mkdtemp(prefix="tritonserver-"))
        backends = assemble_backend_dir(self.installation, self._workdir / "backends")
        self._check_backends(backends)
        if cfg.log_file is None:
            cfg.log_file = PROJECT_ROOT / "logs" / f"tritonserver-{cfg.http_port}.log"
        cfg.log_file.parent.mkdir(parents=True, exist_ok=True)
        command = self._command(backends)
        with open(cfg.log_file, "wb") as log:
            log.write(("$ " + " ".join(command).replace(self.api_key, "***") + "\n").encode())
            log.flush()
            self._process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=server_environment(self.installation),
                preexec_fn=_die_with_parent,
            )
        atexit.register(self.stop)
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _check_backends(self, backends: Path) -> None:
        """Refuse to start when a model needs a native backend that is not there: the
        container would serve it with Triton's own, so nothing stands in for it here."""
        repository = Path(self.config.model_repository)
        needed = native_backends_needed(repository)
        missing = missing_native_backends(backends, set(needed))
        missing.update(_missing_text_mode(backends, repository, missing))
        if missing:
            shutil.rmtree(self._workdir or backends, ignore_errors=True)
            raise BackendUnavailableError(
                "\n".join(
                    f"{reason} (needed by {', '.join(needed[name])})"
                    for name, reason in missing.items()
                )
            )

    def _assign_ports(self) -> None:
        cfg = self.config
        attrs = ("http_port", "grpc_port", "metrics_port")
        fixed = {getattr(cfg, attr) for attr in attrs} - {0}
        spare = [p for p in free_ports(len(attrs) * 2, cfg.host) if p not in fixed]
        for attr in attrs:
            if getattr(cfg, attr) == 0:
                setattr(cfg, attr, spare.pop(0))

    def _command(self, backends: Path) -> list[str]:
        assert self.installation is not None
        cfg = self.config
        return [
            str(self.installation.binary),
            f"--model-repository={Path(cfg.model_repository).resolve()}",
            f"--backend-directory={backends}",
            f"--http-address={cfg.host}",
            f"--http-port={cfg.http_port}",
            f"--grpc-address={cfg.host}",
            f"--grpc-port={cfg.grpc_port}",
            f"--metrics-address={cfg.host}",
            f"--metrics-port={cfg.metrics_port}",
            "--allow-metrics=true",
            *(LATENCY_SUMMARY_ARGS if cfg.latency_summaries else []),
            "--strict-readiness=true",
            "--exit-on-error=true",
            f"--exit-timeout-secs={cfg.exit_timeout_s}",
            f"--log-verbose={cfg.log_verbose}",
            *CONTROL_ARGS,
            *prefix_args(self.shm_prefix),
            *self._restriction_args(),
            *cfg.extra_args,
        ]

    def _restriction_args(self) -> list[str]:
        """Ours, unless the caller restricts the APIs itself (e.g. a manifest's own flags:
        Triton refuses an API named in two restriction groups). Then ``api_key`` must be
        the key those flags name, for the drain's unload calls."""
        own = ("--http-restricted-api", "--grpc-restricted-protocol")
        if any(arg.startswith(own) for arg in self.config.extra_args):
            return []
        return restricted_api_args(self.api_key)

    def _wait_until_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.config.startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._raise_for_exit()
            if self.is_ready():
                self._ready_once = True
                return
            time.sleep(0.2)
        failures = parse_load_failures(self.read_log())
        if failures:
            raise ModelLoadError(failures, str(self.log_file))
        raise StartupTimeoutError(
            f"tritonserver not ready after {self.config.startup_timeout_s:.0f} s; "
            f"see {self.log_file}"
        )

    def _raise_for_exit(self) -> None:
        assert self._process is not None
        log = self.read_log()
        failures = parse_load_failures(log)
        if failures:
            raise ModelLoadError(failures, str(self.log_file))
        tail = "\n".join(log.splitlines()[-15:])
        raise ServerExitedError(
            f"tritonserver exited with code {self._process.returncode} during start-up; "
            f"log {self.log_file} ends with:\n{tail}"
        )

    def is_ready(self) -> bool:
        return http_ready(self.http_url)

    def model_names(self) -> list[str]:
        """Names of the READY models, from the repository index (a restricted endpoint)."""
        request = urllib.request.Request(
            f"{self.http_url}/v2/repository/index",
            data=b"{}",
            headers=api_key_headers(self.api_key),
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            index = json.load(resp)
        return sorted(m["name"] for m in index if m.get("state") == "READY")

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def read_log(self) -> str:
        if self.config.log_file is None or not self.config.log_file.exists():
            return ""
        return self.config.log_file.read_text(errors="replace")

    def drain(self) -> list[str]:
        """Refuse new work to the entry models and let theirs finish (triton_kit/server/drain.py).

        Waits at most ``exit_timeout_s``; returns the entry models still busy then.
        """
        try:
            return Drainer(self.http_url, self.api_key).drain(self.config.exit_timeout_s)
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as exc:
            return [f"drain failed: {exc}"]

    def stop(self) -> None:
        """Drain, then SIGTERM the process group (server and stubs), SIGKILL after a grace.

        In-flight work gets up to ``exit_timeout_s`` to drain, and whatever still runs
        then gets Triton's own exit timeout (the same number of seconds) after SIGTERM.
        """
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            if self._ready_once:
                busy = self.drain()
                if busy:
                    print(f"drain incomplete, stopping anyway: {busy}", file=sys.stderr)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=self.config.exit_timeout_s + 5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if process is not None:
            # Stubs live in the same process group; make sure none outlive the server.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        if process is not None:
            remove_regions(self.shm_prefix)
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)

    def __enter__(self) -> TritonServer:
        return self.start() if self._process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_foreground(config: ServerConfig) -> int:
    """Serve until SIGINT/SIGTERM; for ``make serve``."""
    server = TritonServer(config)
    stop_requested = False

    def _request_stop(signum: int, _frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, _request_stop)
    signal.signal(signal.SIGINT, _request_stop)
    with server:
        print(
            f"tritonserver ready: {server.http_url} (HTTP), {server.grpc_url} (gRPC), "
            f"{server.metrics_url} (metrics); log: {server.log_file}",
            flush=True,
        )
        ready = set(server.model_names())
        for model, backend in backend_table(Path(config.model_repository)):
            if model in ready:
                print(f"  {model:<28} {backend}", flush=True)
        print("Ctrl-C stops it.", flush=True)
        while not stop_requested and server.is_running():
            time.sleep(0.5)
        if not server.is_running() and not stop_requested:
            print(f"tritonserver exited; see {server.log_file}", file=sys.stderr)
            return 1
    return 0

"""Which served AOTInductor request crashes the pytorch_aoti backend on the GPU? (issue 30)

The ResNet-50 package loaded and ran in process on the H100, and Triton loaded it through
pytorch_aoti (READY), but the first request killed the server with SIGSEGV inside
TRITONBACKEND_ModelInstanceExecute (a libc frame under the backend). Here each variant of a
small CUDA MLP package gets a server of its own and one request, with verbose logs:
FP32 vs UINT8 input, KIND_GPU vs KIND_MODEL, batching on vs off. The backend library comes
back with the logs, so the frames can be named with addr2line.

Usage (through scripts/gpu/bench.sh): python3 -m scripts.gpu.diagnostics.aoti_served --out OUT
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = {
    "fp32_gpu": ("FP32", "KIND_GPU", 8),
    "uint8_gpu": ("UINT8", "KIND_GPU", 8),
    "fp32_model": ("FP32", "KIND_MODEL", 8),
    "fp32_gpu_nobatch": ("FP32", "KIND_GPU", 0),
    "fp32_gpu_nopin": ("FP32", "KIND_GPU", 8),
}
# pytorch_aoti's output responder takes its pinned flag from input_pinned_memory.
NO_PINNED = (
    "optimization { input_pinned_memory { enable: false } output_pinned_memory { enable: false } }"
)
# The first variant whose server dies is served again under cuda-gdb: its frames, with lines
# when the backend is built with TRITON_KIT_AOTI_BUILD_TYPE=RelWithDebInfo.
GDB = ["cuda-gdb", "-batch", "-ex", "set pagination off", "-ex", "set print thread-events off",
       "-ex", "handle SIGPIPE nostop noprint", "-ex", "run", "-ex", "bt 40", "-ex", "bt full 6",
       "-ex", "info registers rip", "--args"]  # fmt: skip


def package(dtype: str, batched: bool, path: Path) -> None:
    import torch

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                           torch.nn.Linear(32, 4))  # fmt: skip

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.mlp(x.float())

    net = Net().cuda().eval()
    torch_dtype = torch.uint8 if dtype == "UINT8" else torch.float32
    x = torch.ones(4, 16, dtype=torch_dtype, device="cuda")
    shapes = ({0: torch.export.Dim("batch", min=1, max=8)},) if batched else None
    with torch.no_grad():
        program = torch.export.export(net, (x,), dynamic_shapes=shapes)
        torch._inductor.aoti_compile_and_package(program, package_path=str(path))


def config(name: str, dtype: str, kind: str, max_batch: int) -> str:
    dims = "[ 16 ]" if max_batch else "[ -1, 16 ]"
    out_dims = "[ 4 ]" if max_batch else "[ -1, 4 ]"
    group = f"kind: {kind} count: 1" + (" gpus: [ 0 ]" if kind == "KIND_GPU" else "")
    return f"""name: "{name}"
backend: "pytorch_aoti"
platform: "torch_aoti"
max_batch_size: {max_batch}
input [ {{ name: "INPUT__0" data_type: TYPE_{dtype} dims: {dims} }} ]
output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: {out_dims} }} ]
instance_group [ {{ {group} }} ]
{NO_PINNED if name.endswith("_nopin") else ""}
"""


def one_request(url: str, name: str, dtype: str, max_batch: int) -> str:
    import numpy as np
    import tritonclient.grpc as grpc  # the GPU carry's tritonclient has gRPC, not HTTP

    client = grpc.InferenceServerClient(url)
    x = np.ones((2, 16), dtype=np.uint8 if dtype == "UINT8" else np.float32)
    tensor = grpc.InferInput("INPUT__0", list(x.shape), dtype)
    tensor.set_data_from_numpy(x)
    y = client.infer(name, [tensor], client_timeout=20).as_numpy("OUTPUT__0")
    return f"ok {y.shape} {y.ravel()[:2]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    out = parser.parse_args(argv).out
    out.mkdir(parents=True, exist_ok=True)
    from triton_kit.benchmarks.launcher import bare_command
    from triton_kit.server.binary import (
        assemble_backend_dir,
        find_installation,
        server_environment,
    )
    from triton_kit.server.launcher import free_ports, wait_ready

    library = Path(os.environ["TRITON_KIT_AOTI_BACKEND"])
    shutil.copy2(library, out / library.name)
    installation = find_installation()
    backends = assemble_backend_dir(installation, Path(tempfile.mkdtemp(prefix="b-")) / "b")
    (backends / "pytorch_aoti").mkdir(exist_ok=True)
    shutil.copy2(library, backends / "pytorch_aoti" / library.name)
    packages: dict[tuple[str, bool], Path] = {}
    rows = {}
    debugged = False
    for name, (dtype, kind, max_batch) in [*VARIANTS.items(), ("gdb", (None, None, None))]:
        if name == "gdb":
            crashed = [n for n, row in rows.items() if "SIGSEGV" in row]
            if debugged or not crashed:
                break
            name, (dtype, kind, max_batch), debugged = crashed[0], VARIANTS[crashed[0]], True
        key = (dtype, max_batch > 0)
        if key not in packages:
            packages[key] = Path(tempfile.mkdtemp(prefix="p-")) / "model.pt2"
            package(dtype, max_batch > 0, packages[key])
        repo = Path(tempfile.mkdtemp(prefix="r-"))
        (repo / name / "1").mkdir(parents=True)
        shutil.copy2(packages[key], repo / name / "1" / "model.pt2")
        (repo / name / "config.pbtxt").write_text(config(name, dtype, kind, max_batch))
        ports = free_ports(3)
        log = out / f"server-{name}{'-gdb' if debugged else ''}.log"
        command = [*bare_command(repo, backends, ports), "--log-verbose=1"]
        command = [*GDB, *command] if debugged else command
        with log.open("wb") as sink:
            server = subprocess.Popen(command, env=server_environment(installation), stdout=sink,
                                      stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            if not wait_ready(f"http://127.0.0.1:{ports[0]}", 300.0 if debugged else 120.0):
                row = "not ready"
            else:
                row = one_request(f"127.0.0.1:{ports[1]}", name, dtype, max_batch)
        except Exception as exc:
            row = f"{type(exc).__name__}: {exc}"[:300]
        time.sleep(5 if debugged else 1)
        label = f"{name} (cuda-gdb)" if debugged else name
        # Triton's handler prints the signal and may leave the process hanging, not dead.
        segv = b"Signal (11)" in log.read_bytes() or b"SIGSEGV" in log.read_bytes()
        alive = server.poll() is None
        rows[label] = f"{row} | server alive: {alive}" + (" | SIGSEGV" if segv else "")
        print(label, rows[label], flush=True)
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
    (out / "aoti-served.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Why does ``torch._inductor.aoti_load_package`` segfault on the lent H100? (issue 30)

Issue 30's call 3 saw the load of an AOTInductor ResNet-50 package die with SIGSEGV, in the
building process and in a fresh one. This probe narrows it down, each step in a child
process so one crash does not hide the next:

1. a two-layer MLP on CUDA and on CPU: does *any* package load?
2. the package's contents and the .so's dynamic section (which libraries it wants);
3. the CUDA package loaded through ``AOTIModelContainerRunnerCuda`` on the extracted .so,
   bypassing the package loader;
4. a native backtrace of the crashing load under cuda-gdb (the machine has no gdb).

Usage (on the device): python3 scripts/gpu/diagnostics/aoti_crash.py OUT_DIR
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

BUILD = r"""
import sys, time, torch
device, path = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
m = m.to(device).eval()
x = torch.randn(8, 16, device=device)
t = time.time()
with torch.no_grad():
    ep = torch.export.export(m, (x,))
    torch._inductor.aoti_compile_and_package(ep, package_path=path)
torch.save({"x": x.cpu(), "y": m(x).detach().cpu()}, path + ".ref")
print("built", round(time.time() - t, 1), "s", flush=True)
"""

LOAD = r"""
import faulthandler, sys, torch
faulthandler.enable()
device, path = sys.argv[1], sys.argv[2]
if device == "cuda":
    torch.cuda.init()
print("loading", flush=True)
runner = torch._inductor.aoti_load_package(path)
print("loaded", flush=True)
ref = torch.load(path + ".ref")
y = runner(ref["x"].to(device))
print("max abs diff", float((y.cpu() - ref["y"]).abs().max()), flush=True)
"""

RUNNER = r"""
import faulthandler, sys, torch
faulthandler.enable()
so, cubins = sys.argv[1], sys.argv[2]
torch.cuda.init()
print("runner on", so, flush=True)
r = torch._C._aoti.AOTIModelContainerRunnerCuda(so, 1, "cuda", cubins)
print("constructed", flush=True)
x = torch.randn(8, 16, device="cuda")
print("ran", r.run([x])[0].shape, flush=True)
"""


def child(args: list[str], timeout: int = 300) -> dict:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return {"rc": "timeout", "stdout": str(exc.stdout)[-2000:]}
    return {"rc": done.returncode, "stdout": done.stdout[-4000:], "stderr": done.stderr[-6000:]}


def shell(command: str) -> str:
    done = subprocess.run(command, shell=True, capture_output=True, text=True)
    return (done.stdout + done.stderr)[-6000:]


def main(out: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="aoti-crash-"))
    versions = "import torch, sys; print(torch.__version__, torch.version.cuda, sys.version)"
    rows: dict[str, object] = {"versions": shell(
        f"{sys.executable} -c '{versions}'; g++ --version | head -1; nvcc --version | tail -2;"
        " which cuda-gdb")}  # fmt: skip
    for device in ("cpu", "cuda"):
        package = str(work / f"mlp-{device}.pt2")
        rows[f"build-{device}"] = child([sys.executable, "-c", BUILD, device, package])
        rows[f"load-{device}"] = child([sys.executable, "-c", LOAD, device, package])
        print(device, rows[f"build-{device}"]["rc"], rows[f"load-{device}"]["rc"], flush=True)
    package = work / "mlp-cuda.pt2"
    if package.exists():
        extracted = work / "extracted"
        with zipfile.ZipFile(package) as archive:
            archive.extractall(extracted)
            rows["contents"] = archive.namelist()
        libraries = sorted(str(p) for p in extracted.rglob("*.so"))
        rows["so"] = {lib: shell(f"readelf -d {lib} | grep -E 'NEEDED|RPATH|RUNPATH'; ldd {lib}")
                      for lib in libraries}  # fmt: skip
        if libraries:
            cubins = str(Path(libraries[0]).parent)
            rows["runner-cuda"] = child([sys.executable, "-c", RUNNER, libraries[0], cubins])
        if shutil.which("cuda-gdb") and rows["load-cuda"].get("rc") not in (0,):
            script = work / "load.py"
            script.write_text(LOAD)
            rows["cuda-gdb"] = shell(
                f"timeout 240 cuda-gdb -batch -ex 'set pagination off' -ex run -ex 'bt 30' "
                f"--args {sys.executable} {script} cuda {package} 2>&1"
                " | grep -v -E '^\\[(New|Thread)' | tail -150"
            )
    (out / "aoti-crash.json").write_text(json.dumps(rows, indent=2, default=str))
    print(json.dumps({k: (v.get("rc") if isinstance(v, dict) and "rc" in v else "...")
                      for k, v in rows.items()}))  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", ".")))

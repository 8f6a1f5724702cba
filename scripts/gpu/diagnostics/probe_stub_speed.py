"""Probe: is Python + torch slower inside a python-backend stub than in a plain process?

On the H100 the served NMT search's encoder call took 12 ms of host time per execute in the
stub against 4 ms in-process (benchmarks/results/gpu.md at e9bc558). This probe times the
same small CUDA
launch loop (and a numpy loop) in this process and inside a python model's ``initialize``,
and reports what could differ: CPU affinity, torch threads, switch interval, live threads.

Usage: python scripts/gpu/diagnostics/probe_stub_speed.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

MEASURE = textwrap.dedent(
    """
    def measure():
        import os, sys, threading, time
        import numpy as np
        import torch
        report = {
            "affinity": len(os.sched_getaffinity(0)),
            "torch_threads": torch.get_num_threads(),
            "switch_interval_s": sys.getswitchinterval(),
            "threads": [t.name for t in threading.enumerate()],
            "omp": os.environ.get("OMP_NUM_THREADS"),
            "numpy": np.__version__,
        }
        x = torch.zeros(64, 512, device="cuda")
        for _ in range(200):
            x = x + 1
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(2000):
            x = x + 1
        torch.cuda.synchronize()
        report["cuda_launch_us"] = (time.perf_counter() - start) / 2000 * 1e6
        a = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
        start = time.perf_counter()
        for _ in range(20000):
            np.lexsort((a, -a))
        report["numpy_lexsort_us"] = (time.perf_counter() - start) / 20000 * 1e6
        start = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i
        report["python_loop_ms"] = (time.perf_counter() - start) * 1e3
        return report
    """
)
MODEL = MEASURE + textwrap.dedent(
    """
    import json
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            self.report = measure()

        def execute(self, requests):
            out = pb_utils.Tensor("OUT", np.array([json.dumps(self.report)], dtype=np.object_))
            return [pb_utils.InferenceResponse(output_tensors=[out]) for _ in requests]
    """
)
CONFIG = """
backend: "python"
max_batch_size: 0
input [{ name: "X" data_type: TYPE_FP32 dims: [1] }]
output [{ name: "OUT" data_type: TYPE_STRING dims: [1] }]
instance_group [{ kind: KIND_GPU count: 1 }]
"""


def main(out: Path) -> int:
    import numpy as np
    import tritonclient.grpc as grpc
    from probe_server import probe_server

    out.mkdir(parents=True, exist_ok=True)
    namespace: dict = {}
    exec(MEASURE, namespace)  # the same function text the stub runs
    here = namespace["measure"]()
    log = out / "probe-speed-tritonserver.log"
    with probe_server({"speed": (MODEL, CONFIG)}, log) as url:
        client = grpc.InferenceServerClient(url)
        x = grpc.InferInput("X", [1], "FP32")
        x.set_data_from_numpy(np.zeros(1, dtype=np.float32))
        stub = json.loads(client.infer("speed", [x]).as_numpy("OUT")[0])
    report = {"this process": here, "python-backend stub": stub}
    (out / "probe_stub_speed.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))

"""Probe the python backend's tensor I/O on this machine (issue 10, served values wrong).

A plain model.py (no project code) logs each input as ``as_numpy()`` sees it and returns
the input back plus a known constant, so a wrong answer says whether inputs or outputs
are misread. Usage: python scripts/gpu/probe_io.py OUT_DIR
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np

MODEL = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                t = pb_utils.get_input_tensor_by_name(request, "X")
                a = t.as_numpy()
                info = {"numpy": np.__version__, "numpy_file": np.__file__,
                        "sys_path": sys.path, "env": os.environ.get("PYTHONPATH"),
                        "py": sys.version.split()[0],
                        "shape": a.shape, "strides": a.strides, "dtype": str(a.dtype),
                        "c": bool(a.flags.c_contiguous), "values": a.tolist()}
                print("PROBE " + json.dumps(info), flush=True)
                echo = np.array(a, copy=True)
                const = np.arange(a.size, dtype=np.float32).reshape(a.shape)
                out.append(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("ECHO", echo), pb_utils.Tensor("CONST", const)]))
            return out
    """
)
CONFIG = textwrap.dedent(
    """
    backend: "python"
    max_batch_size: 8
    input [{ name: "X" data_type: TYPE_FP32 dims: [4] }]
    output [{ name: "ECHO" data_type: TYPE_FP32 dims: [4] },
            { name: "CONST" data_type: TYPE_FP32 dims: [4] }]
    instance_group [{ kind: KIND_CPU count: 1 }]
    """
)


def main(out: Path) -> int:
    import tritonclient.grpc as grpc
    from probe_server import probe_server

    log = out / "probe-tritonserver.log"
    x = np.arange(8, dtype=np.float32).reshape(2, 4) + 1
    with probe_server({"probe": (MODEL, CONFIG)}, log) as url:
        client = grpc.InferenceServerClient(url)
        inp = grpc.InferInput("X", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        result = client.infer("probe", [inp])
        echo, const = result.as_numpy("ECHO"), result.as_numpy("CONST")
    report = [
        f"client numpy {np.__version__}",
        f"sent  {x.tolist()}",
        f"ECHO  {echo.tolist()}  ok={np.array_equal(echo, x)}",
        f"CONST {const.tolist()}  ok={np.array_equal(const.ravel(), np.arange(8))}",
        *[line for line in log.read_text().splitlines() if "PROBE" in line],
    ]
    (out / "probe.txt").write_text("\n".join(report) + "\n")
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))

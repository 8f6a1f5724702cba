"""Probe what answering a request costs inside a python-backend execute (issue 10/11).

On the H100 the served NMT search took about 1.5 ms more per sentence than the same
search in-process (benchmarks/results/gpu.md at e9bc558). The ``nmt`` model answers each
request through its
response sender as soon as its sentences finish. This probe serves four plain models (no
project code in the stub) that answer every request of a batch either through
``sender.send`` or by returning the responses, with and without a CUDA context in the
stub, and times the answering inside ``execute``.

Usage: python scripts/gpu/diagnostics/probe_send.py OUT_DIR [--seconds 5] [--concurrency 32]
Writes OUT_DIR/probe_send.md and probe_send.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np

MODEL = textwrap.dedent(
    """
    import json, time
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            params = json.loads(args["model_config"])["parameters"]
            self.mode = params["mode"]["string_value"]
            self.log = params["log"]["string_value"]
            if params["cuda"]["string_value"] == "1":
                import torch
                self.keep = torch.zeros(1, device="cuda")  # a CUDA context in this stub

        def execute(self, requests):
            start = time.perf_counter()
            responses = []
            for request in requests:
                text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
                out = pb_utils.Tensor("OUT", np.array(text, dtype=np.object_))
                responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
            built = time.perf_counter()
            if self.mode == "send":
                for request, response in zip(requests, responses):
                    request.get_response_sender().send(
                        response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                result = None
            else:
                result = responses
            row = [len(requests), built - start, time.perf_counter() - built]
            with open(self.log, "a") as f:
                f.write(json.dumps(row) + "\\n")
            return result
    """
)
CONFIG = """
backend: "python"
max_batch_size: 64
input [{{ name: "TEXT" data_type: TYPE_STRING dims: [1] }}]
output [{{ name: "OUT" data_type: TYPE_STRING dims: [1] }}]
dynamic_batching {{ }}
instance_group [{{ kind: KIND_CPU count: 1 }}]
parameters [{{ key: "mode" value: {{ string_value: "{mode}" }} }},
            {{ key: "cuda" value: {{ string_value: "{cuda}" }} }},
            {{ key: "log" value: {{ string_value: "{log}" }} }}]
"""
VARIANTS = {
    "send_cpu": ("send", "0"),
    "send_cuda": ("send", "1"),
    "return_cpu": ("return", "0"),
    "return_cuda": ("return", "1"),
}


def variant_models(root: Path, names: list[str]) -> dict[str, tuple[str, str]]:
    """Each variant's model and config; each logs its executes to ``root/<name>.jsonl``."""
    models = {}
    for name in names:
        mode, cuda = VARIANTS[name]
        log = root / f"{name}.jsonl"
        models[name] = (MODEL, CONFIG.format(mode=mode, cuda=cuda, log=log))
    return models


def load(url: str, model: str, seconds: float, concurrency: int) -> int:
    import tritonclient.grpc as grpc

    stop = time.perf_counter() + seconds
    counts = [0] * concurrency

    def user(index: int) -> None:
        client = grpc.InferenceServerClient(url)
        inp = grpc.InferInput("TEXT", [1, 1], "BYTES")
        inp.set_data_from_numpy(np.array([[b"Hello world."]], dtype=np.object_))
        while time.perf_counter() < stop:
            client.infer(model, [inp])
            counts[index] += 1

    threads = [threading.Thread(target=user, args=(i,)) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts)


def summarise(log: Path, requests: int, seconds: float) -> dict:
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    batch = sum(r[0] for r in rows)
    return {
        "requests/s": round(requests / seconds, 1),
        "mean batch": round(batch / len(rows), 2),
        "build ms/request": round(1e3 * sum(r[1] for r in rows) / batch, 4),
        "answer ms/request": round(1e3 * sum(r[2] for r in rows) / batch, 4),
    }


def main(argv: list[str] | None = None) -> int:
    from probe_server import probe_server

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    names = [n for n in VARIANTS if torch.cuda.is_available() or VARIANTS[n][1] == "0"]
    root = Path(tempfile.mkdtemp())
    log = args.out / "probe-send-tritonserver.log"
    results = {}
    with probe_server(variant_models(root, names), log) as url:
        for name in names:
            load(url, name, 1.0, args.concurrency)  # warm-up, not logged below
            (root / f"{name}.jsonl").write_text("")
            served = load(url, name, args.seconds, args.concurrency)
            results[name] = summarise(root / f"{name}.jsonl", served, args.seconds)
            print(name, results[name], flush=True)
    lines = ["# python backend: answering a request inside execute", ""]
    lines += [f"concurrency {args.concurrency}, {args.seconds} s per variant", ""]
    lines += ["| variant | requests/s | mean batch | build ms/request | answer ms/request |"]
    lines += ["|---|---|---|---|---|"]
    for name, r in results.items():
        lines.append(f"| {name} | " + " | ".join(str(v) for v in r.values()) + " |")
    (args.out / "probe_send.md").write_text("\n".join(lines) + "\n")
    (args.out / "probe_send.json").write_text(json.dumps(results, indent=2))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

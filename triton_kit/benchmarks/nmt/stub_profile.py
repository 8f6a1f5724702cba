"""Where the ``nmt`` python model's time goes in front of ``nmt_ct2`` (issue 31).

    python -m triton_kit.benchmarks.nmt.stub_profile --cells 4x8,4x32,1x8,1x32 --repeats 2

Builds the ``--engine ctranslate2`` repository of the default number model (as the benchmark's
``--ct2-sizes tiny`` does), and for each cell (beam x concurrency, closed loops, one sentence a
request, the benchmark's held-out sentences) starts a server with ``TRITON_KIT_PROFILE_DIR``
set and measures back to back:

- ``nmt (SDK)``: clients of the ``nmt`` model through the kit's SDK (the benchmark's
  ``Triton ctranslate2 (gRPC)``);
- ``nmt (raw gRPC)``: the same model through bare ``tritonclient.grpc``, the client stack of
  the direct cell, so the two differ by the ``nmt`` model alone;
- ``nmt_ct2 direct``: token ids straight to ``nmt_ct2``, sentencepiece in the client thread.

Printed per cell: sentences/s of each; for the ``nmt (SDK)`` loop, Triton's statistics of
``nmt`` (batch, queue, compute per execution) and of ``nmt_ct2`` (its queue, input, infer and
output time per execution), the stub's own phases per execute (``parse``: reading the
inputs, checking and tokenising them; ``search``: the feeds, the BLS call and unpacking the
ids; ``answer``: detokenising and building the responses), and CPU milliseconds per sentence
of each process (this one, with its client threads; ``tritonserver``; the python stub), from
which the BLS round trip (``search`` minus ``nmt_ct2``'s own time) and the python backend's
IPC (Triton's compute minus the stub's ``execute``) follow.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from triton_kit.benchmarks.nmt.architectures import TRANSFORMER_NAMES
from triton_kit.benchmarks.nmt.measure import count_tokens_for, held_out_pairs, measure
from triton_kit.benchmarks.nmt.served import measure_ct2_direct, measure_triton, raw_text_factory
from triton_kit.build_engines.families.nmt.ct2_engine import CT2_MODEL
from triton_kit.python_models.common.base import PROFILE_DIR_ENV


def cpu_seconds() -> dict[str, float]:
    """User + system CPU seconds of this process and of each child process kind."""
    import psutil

    me = psutil.Process()
    seconds = {"client": sum(me.cpu_times()[:2])}
    for child in me.children(recursive=True):
        try:
            name = "stub" if "python_backend_stub" in child.name() else child.name()
            seconds[name] = seconds.get(name, 0.0) + sum(child.cpu_times()[:2])
        except psutil.Error:
            pass
    return seconds


def engine_stats(grpc_url: str) -> dict[str, float]:
    """``nmt_ct2``'s executions and summed queue/compute nanoseconds."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(grpc_url.split("://", 1)[-1])
    try:
        reply = client.get_inference_statistics(model_name=CT2_MODEL, as_json=True)
    finally:
        client.close()
    (stats,) = reply["model_stats"]
    found = {"executions": float(stats.get("execution_count", 0))}
    found["queue"] = float(stats.get("inference_stats", {}).get("queue", {}).get("ns", 0))
    for batch in stats.get("batch_stats", []):
        for key in ("compute_input", "compute_infer", "compute_output"):
            found[key] = found.get(key, 0.0) + float(batch.get(key, {}).get("ns", 0))
    return found


def _per(after: dict[str, float], before: dict[str, float], count: float) -> dict[str, float]:
    return {k: round((v - before.get(k, 0.0)) / (count or 1.0), 3) for k, v in after.items()}


def profile_cell(repository: Path, beam: int, level: int, pairs, count_tokens) -> dict:
    """One server, the three loops, what the stub's profile wrote when it unloaded."""
    from triton_kit.server import ServerConfig, TritonServer

    profile_dir = Path(tempfile.mkdtemp(prefix="nmt-stub-profile-"))
    os.environ[PROFILE_DIR_ENV] = str(profile_dir)
    try:
        config = ServerConfig(model_repository=repository, http_port=0, grpc_port=0, metrics_port=0)
        with TritonServer(config) as server:
            url = server.grpc_url
            engine_before, cpu_before = engine_stats(url), cpu_seconds()
            sdk = measure_triton(server, beam, level, pairs, count_tokens, "nmt (SDK)")
            engine_after, cpu_after = engine_stats(url), cpu_seconds()
            clients: list = []
            raw = measure("nmt (raw gRPC)", raw_text_factory(url, beam, clients), beam, level,
                          pairs, count_tokens)  # fmt: skip
            for client in clients:
                client.close()
            direct = measure_ct2_direct(server, beam, level, pairs, count_tokens, "direct")
    finally:
        os.environ.pop(PROFILE_DIR_ENV, None)
    executions = engine_after["executions"] - engine_before["executions"]
    engine = _per(engine_after, engine_before, executions * 1e6)
    engine["executions"] = executions
    cpu = _per(cpu_after, cpu_before, len(pairs) / 1e3)  # includes the warm-up calls
    (stub_file,) = profile_dir.glob(f"{TRANSFORMER_NAMES.bls}-*.json")
    return {
        "cell": f"beam {beam} c{level}",
        "sent/s": {c.engine: round(c.sentences_per_s) for c in (sdk, raw, direct)},
        "nmt / direct": round(sdk.sentences_per_s / direct.sentences_per_s, 2),
        "nmt raw gRPC / direct": round(raw.sentences_per_s / direct.sentences_per_s, 2),
        "exact": [c.exact for c in (sdk, raw, direct)],
        "nmt (Triton)": {k: round(v, 3) for k, v in sdk.phases.items()},
        "nmt_ct2 ms/execution": engine,
        "stub (whole server life)": json.loads(stub_file.read_text()),
        "cpu ms/sentence (nmt SDK loop)": cpu,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m triton_kit.benchmarks.nmt.stub_profile", description=__doc__
    )
    parser.add_argument("--cells", default="4x8,4x32,1x8,1x32", help="beam x concurrency")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    from triton_kit.benchmarks.nmt.matrix import variant_repository
    from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT

    workdir = Path(tempfile.mkdtemp(prefix="nmt-stub-"))
    repository = variant_repository(
        DEFAULT_CHECKPOINT, workdir, "tiny", args.threads, "ct2", "transformer"
    )
    count_tokens = count_tokens_for(repository, TRANSFORMER_NAMES.bls)
    pairs = held_out_pairs()
    print(f"load average at start {os.getloadavg()}", flush=True)
    for cell in args.cells.split(","):
        beam, level = (int(v) for v in cell.split("x"))
        for _ in range(args.repeats):
            found = profile_cell(
                repository, beam, level, pairs[: max(192, 12 * level)], count_tokens
            )
            print(json.dumps(found), flush=True)
    print(f"load average at the end {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()

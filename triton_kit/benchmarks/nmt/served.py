"""The NMT benchmark's served engines: copies of an architecture's served models with the
in-process engines' thread budget, closed-loop gRPC clients of its BLS model, and Triton's own
statistics of each cell (the BLS model's, and those of the search engine it calls, where the
repository serves one)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from triton_kit.benchmarks.nmt.architectures import TRANSFORMER_NAMES
from triton_kit.benchmarks.nmt.measure import Cell, measure, with_phases
from triton_kit.benchmarks.nmt.report import TRITON
from triton_kit.build_engines.families.nmt.architecture import ModelNames
from triton_kit.build_engines.families.nmt.ct2_engine import CT2_MODEL
from triton_kit.build_engines.repository import parse
from triton_kit.build_engines.repository import render as render_config


def triton_factory(url: str, beam: int, created: list, model: str = TRANSFORMER_NAMES.bls):
    """Clients of the served BLS ``model``, one a closed-loop client thread."""
    from triton_kit.client import TritonClient

    def make() -> Callable[[str], str]:
        triton = TritonClient(url)
        created.append(triton)
        return lambda text: triton.translate(text, beam_size=beam, model=model)[0]

    return make


class TritonStats:
    """The BLS model's (``names.bls``) counters from Triton's statistics API, differenced per
    cell, and those of the search engine it calls (``names.generate``) where the repository
    serves one."""

    def __init__(self, grpc_url: str, names: ModelNames = TRANSFORMER_NAMES) -> None:
        # gRPC, not HTTP: tritonclient.http needs gevent, which the lent GPU machine lacks.
        import tritonclient.grpc as grpcclient

        self.names = names
        self.client = grpcclient.InferenceServerClient(grpc_url.split("://", 1)[-1])

    def _model(self, name: str) -> dict | None:
        from tritonclient.utils import InferenceServerException

        try:
            reply = self.client.get_inference_statistics(model_name=name, as_json=True)
        except InferenceServerException:  # not in this repository
            return None
        (stats,) = reply["model_stats"]
        return stats

    def snapshot(self) -> dict[str, float]:
        stats = self._model(self.names.bls)
        assert stats is not None
        inference = stats.get("inference_stats", {})
        snap = {
            "requests": _ns(inference.get("success", {}), "count"),
            "queue": _ns(inference.get("queue", {})),  # summed over requests
            "executions": float(stats.get("execution_count", 0)),
            "compute": _compute(stats),
        }
        engine = self._model(self.names.generate) or self._model(CT2_MODEL)
        if engine is not None:
            snap["engine executions"] = float(engine.get("execution_count", 0))
            snap["engine compute"] = _compute(engine)
        return snap

    @staticmethod
    def phases(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        diff = {key: after[key] - before[key] for key in after}
        requests, executions = diff["requests"], max(diff["executions"], 1.0)
        phases = {
            "batch": requests / executions,
            "queue ms/request": diff["queue"] / requests / 1e6,
            "compute ms/execution": diff["compute"] / executions / 1e6,
            "ms/sentence": diff["compute"] / requests / 1e6,
        }
        if "engine compute" in diff:
            phases["engine calls/execution"] = diff["engine executions"] / executions
            phases["engine ms/sentence"] = diff["engine compute"] / requests / 1e6
        return phases


def _ns(counter: dict, field: str = "ns") -> float:  # proto JSON leaves zeros out
    return float(counter.get(field, 0))


def _compute(stats: dict) -> float:
    """compute_infer summed per execution (batch_stats), not per request: one run a batch."""
    return sum(_ns(b.get("compute_infer", {})) for b in stats.get("batch_stats", []))


def measure_triton(
    server,
    beam: int,
    level: int,
    pairs,
    count_tokens,
    name: str = TRITON,
    names: ModelNames = TRANSFORMER_NAMES,
) -> Cell:
    """A cell of the served BLS model ``names.bls``, with Triton's own phases."""
    clients: list = []
    stats = TritonStats(server.grpc_url, names)
    before: list[dict[str, float]] = []
    factory = triton_factory(server.grpc_url, beam, clients, names.bls)
    cell = measure(
        name, factory, beam, level, pairs, count_tokens, lambda: before.append(stats.snapshot())
    )
    cell = with_phases(cell, TritonStats.phases(before[0], stats.snapshot()))
    for triton in clients:
        triton.close()
    return cell


def ct2_direct_factory(url: str, beam: int, created: list, repository: Path):
    """Clients straight to ``nmt_ct2`` (the kit's ctranslate2 backend), with no ``nmt`` python
    model between: each tokenises and detokenises in the client thread (the same
    sentencepiece code as the ``nmt`` model, MarianText), one sentence a request."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    from triton_kit.python_models.nmt.generate import CT2_BEAM, CT2_OUTPUT, CT2_PAD, CT2_SOURCE
    from triton_kit.python_models.nmt.text import MarianText

    text = MarianText(repository / TRANSFORMER_NAMES.bls / "1", 128)
    beams = np.array([[beam]], dtype=np.int32)

    def make() -> Callable[[str], str]:
        client = grpcclient.InferenceServerClient(url.split("://", 1)[-1])
        created.append(client)

        def call(sentence: str) -> str:
            ids = np.array([text.encode(sentence)], dtype=np.int32)
            source = grpcclient.InferInput(CT2_SOURCE, list(ids.shape), "INT32")
            source.set_data_from_numpy(ids)
            beam_input = grpcclient.InferInput(CT2_BEAM, [1, 1], "INT32")
            beam_input.set_data_from_numpy(beams)
            row = client.infer(CT2_MODEL, [source, beam_input]).as_numpy(CT2_OUTPUT)[0]
            return text.decode([int(i) for i in row if i != CT2_PAD])

        return call

    return make


def raw_text_call(client, beam: int, model: str = TRANSFORMER_NAMES.bls) -> Callable[[str], str]:
    """One sentence a request to the text ``model`` on a bare ``tritonclient.grpc`` client
    (also what ``benchmarks.nmt.sdk_profile`` sets against the SDK)."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    beams = np.array([[beam]], dtype=np.int32)

    def call(sentence: str) -> str:
        text = grpcclient.InferInput("TEXT", [1, 1], "BYTES")
        text.set_data_from_numpy(np.array([[sentence.encode()]], dtype=np.object_))
        beam_input = grpcclient.InferInput("BEAM_SIZE", [1, 1], "INT32")
        beam_input.set_data_from_numpy(beams)
        result = client.infer(model, [text, beam_input]).as_numpy("TRANSLATION")
        return str(result[0][0].decode())

    return call


def raw_text_factory(url: str, beam: int, created: list, model: str = TRANSFORMER_NAMES.bls):
    """Clients of the text ``model`` through bare ``tritonclient.grpc`` (the direct cell's
    client stack, not the kit's SDK), one sentence a request: what the server costs, apart
    from the SDK's client CPU that shares the machine's cores (docs/nmt_ct2_stub.md)."""
    import tritonclient.grpc as grpcclient

    def make() -> Callable[[str], str]:
        client = grpcclient.InferenceServerClient(url.split("://", 1)[-1])
        created.append(client)
        return raw_text_call(client, beam, model)

    return make


def measure_raw_text(server, beam: int, level: int, pairs, count_tokens, name: str) -> Cell:
    """A cell of bare-``tritonclient`` clients of the text ``nmt`` (:func:`raw_text_factory`)."""
    clients: list = []
    cell = measure(
        name, raw_text_factory(server.grpc_url, beam, clients), beam, level, pairs, count_tokens
    )
    for client in clients:
        client.close()
    return cell


def measure_ct2_direct(server, beam: int, level: int, pairs, count_tokens, name: str) -> Cell:
    """A cell of clients calling ``nmt_ct2`` directly (:func:`ct2_direct_factory`)."""
    clients: list = []
    repository = Path(server.config.model_repository)
    factory = ct2_direct_factory(server.grpc_url, beam, clients, repository)
    cell = measure(name, factory, beam, level, pairs, count_tokens)
    for client in clients:
        client.close()
    return cell


def copy_models(
    source: Path, target: Path, threads: int, names: ModelNames = TRANSFORMER_NAMES
) -> None:
    """The architecture's served models (the BLS model, its step models and its search engine,
    those built, ``nmt_ct2`` too), with the same intra-op thread budget as the in-process
    engines."""
    for name in (*names.steps, names.generate, CT2_MODEL):
        if not (source / name).is_dir():
            continue
        shutil.copytree(source / name, target / name)
        config_file = target / name / "config.pbtxt"
        config = parse(config_file.read_text())
        if config.backend == "ctranslate2":  # the kit's backend: its own parameter
            config.parameters["intra_threads"].string_value = str(threads)
            config_file.write_text(render_config(config))
            continue
        config.parameters["intra_op_thread_count"].string_value = str(threads)
        if name != names.bls:
            config.parameters["inter_op_thread_count"].string_value = "1"
        config_file.write_text(render_config(config))

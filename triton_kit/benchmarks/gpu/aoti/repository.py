"""The served rows' model repository: the package once per row (instances, queue delay,
warm-up, gather threshold, CUDA graphs, preferred sizes), each with the ``config.pbtxt`` that
serves it through ``pytorch_aoti``, and the TorchScript baseline for Triton's own pytorch
backend.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from triton_kit.benchmarks.gpu.aoti.family import Family
from triton_kit.benchmarks.gpu.aoti.options import Options
from triton_kit.benchmarks.gpu.settings import Settings
from triton_kit.build_engines.engines.aoti.config import capture_order, graph_batch_sizes

AOTI_BACKEND = "pytorch_aoti"
BASELINE = "native_i4_d2000p"


def warmup_config(spec: Family, sizes: Iterable[int] | None = None) -> str:
    """Triton's ``model_warmup`` at every batch size 1..max, or at ``sizes`` (zeros: a plan does
    not depend on the data), run on each instance's own thread before the model is ready,
    largest first (a graph captured at each then reuses the larger ones' memory)."""
    sizes = capture_order(tuple(range(1, spec.max_batch + 1) if sizes is None else sizes))
    inputs = " ".join(
        f'inputs {{ key: "INPUT__{i}" value {{ data_type: TYPE_{dtype} '
        f"dims: [ {', '.join(map(str, dims))} ] zero_data: true }} }}"
        for i, (dtype, dims) in enumerate(spec.inputs)
    )
    samples = ",\n  ".join(f'{{ name: "bs{b}" batch_size: {b} {inputs} }}' for b in sizes)
    return f"model_warmup [\n  {samples}\n]\n"


def graphs_config(spec: Family, warmup: bool, sizes: tuple[int, ...] = ()) -> str:
    """Triton's ``optimization.cuda.graphs`` with a graph per size in ``sizes`` (default: those
    the kit's build writes, ``build_engines --engine aoti --cuda-graphs``), each captured at
    load by a warm-up request of its size unless the row already warms up every size."""
    sizes = sizes or graph_batch_sizes(spec.max_batch)
    specs = ", ".join(f"{{ batch_size: {b} }}" for b in sizes)
    graphs = f"optimization {{ cuda {{ graphs: true graph_spec [ {specs} ] }} }}\n"
    return graphs + ("" if warmup else warmup_config(spec, sizes))


def aoti_config(
    spec: Family,
    name: str,
    instances: int,
    gpu: bool,
    delay_us: int = 2000,
    warmup: bool = False,
    gather: int = 0,
    graphs: bool = False,
    preferred: bool = True,
    graph_sizes: tuple[int, ...] = (),
    batcher: bool = True,
) -> str:
    """Batching as gpu_engines.md's best TorchScript row (2000 us, the family's preferred
    sizes); delay 0 and no preferred sizes for the batch-1 row, where waiting only adds
    latency. ``warmup``: every batch size once per instance at load (:func:`warmup_config`);
    ``gather``: the backend's gather-kernel threshold (0: the parameter is left out);
    ``graphs``: Triton's ``optimization.cuda.graphs`` (:func:`graphs_config`); ``preferred``
    off: no preferred sizes, so a batch goes when an instance is free or the delay ends;
    ``graph_sizes``: the graphs' batch sizes (default: the build's); ``batcher`` off: no
    ``dynamic_batching`` (Triton's default scheduler, each request straight to an instance)."""
    batching = f"max_queue_delay_microseconds: {delay_us}"
    if delay_us and preferred:
        sizes = ", ".join(str(b) for b in spec.preferred)
        batching += f" preferred_batch_size: [ {sizes} ]"
    kind = "kind: KIND_GPU gpus: [ 0 ]" if gpu else "kind: KIND_CPU"
    inputs = ", ".join(
        f'{{ name: "INPUT__{i}" data_type: TYPE_{dtype} dims: [ {", ".join(map(str, dims))} ] }}'
        for i, (dtype, dims) in enumerate(spec.inputs)
    )
    extra = (warmup_config(spec) if warmup else "") + gather_parameter(gather)
    extra += graphs_config(spec, warmup, graph_sizes) if graphs else ""
    return f"""name: "{name}"
backend: "{AOTI_BACKEND}"
platform: "torch_aoti"
max_batch_size: {spec.max_batch}
input [ {inputs} ]
output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ {spec.output_dims} ] }} ]
instance_group [ {{ {kind} count: {instances} }} ]
{f"dynamic_batching {{ {batching} }}" if batcher else ""}
{extra}"""


def gather_parameter(threshold: int) -> str:
    """The kit's backend build reads GATHER_KERNEL_BUFFER_THRESHOLD (scripts/gpu/aoti_backend.sh);
    nothing for 0, the backend's own default."""
    if not threshold:
        return ""
    value = f'value {{ string_value: "{threshold}" }}'
    return f'parameters {{ key: "GATHER_KERNEL_BUFFER_THRESHOLD" {value} }}\n'


def torchscript_baseline(module, settings: Settings) -> Path:
    """The TorchScript the native pytorch backend serves (gpu_engines.md's ``native_i4_d2000p``),
    traced before the AOTI build turns the module channels_last."""
    from triton_kit.benchmarks.gpu.serving import traced

    path = Path(tempfile.mkdtemp(prefix="ts-")) / "model.pt"
    traced(module, settings, False).save(str(path))
    return path


def write_repository(
    repo: Path, package: Path, model_pt: Path, settings: Settings, options: Options
) -> list[str]:
    from triton_kit.benchmarks.gpu.serving import PREFERRED as TS_PREFERRED
    from triton_kit.benchmarks.gpu.serving import Variant, write_variant

    spec = options.spec
    names = []
    batched = [
        (n, delay, warm == "all", gather, graphs, preferred, True)
        for graphs in options.graphs
        for warm in options.warmups
        for gather in options.gathers
        for delay in options.delays_us
        for preferred in options.preferred
        for n in options.instances
    ]
    single = [(1, 0, False, 0, graphs, False, batcher)
              for graphs in options.c1_graphs for batcher in options.c1_batcher]  # fmt: skip
    for count, delay, warm, gather, graphs, preferred, batcher in [*single, *batched]:
        name = f"{spec.prefix}_i{count}_d{delay}" + ("p" if preferred else "")
        name += "_direct" * (not batcher) + (f"_g{gather}" if gather else "") + ("_warm" * warm)
        name += "_cg" * graphs
        (repo / name / "1").mkdir(parents=True)
        shutil.copy2(package, repo / name / "1" / "model.pt2")
        config = aoti_config(spec, name, count, settings.gpu, delay, warm, gather, graphs,
                             preferred, graph_sizes=options.graph_sizes,
                             batcher=batcher)  # fmt: skip
        (repo / name / "config.pbtxt").write_text(config)
        names.append(name)
    if not options.with_baseline:
        return names
    write_variant(repo, Variant(BASELINE, 4, 2000, TS_PREFERRED), model_pt, settings)
    return [*names, BASELINE]

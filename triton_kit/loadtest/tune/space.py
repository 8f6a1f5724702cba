"""What to search for one model: ranges derived from its config.pbtxt and this machine.

Instance counts go up to the cores (at most 4: more instances than cores only queue on
each other); the queue delay is tried off and at 2 ms beside its current value; batch sizes
stay as built unless asked, because an ensemble's max_batch_size must not exceed its
composing models'. Concurrency spans one client, one per core and four per core.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.loadtest.tune.errors import TuneError
from triton_kit.loadtest.tune.options import TuneOptions

MAX_DEFAULT_INSTANCES = 4
DEFAULT_QUEUE_DELAYS_US = (0, 2000)


def load_config(repository: Path, model: str) -> mc.ModelConfig:
    """The model's config.pbtxt; an unknown model names the ones the repository has."""
    path = Path(repository) / model / "config.pbtxt"
    if not path.is_file():
        known = sorted(p.parent.name for p in Path(repository).glob("*/config.pbtxt"))
        raise TuneError(f"unknown model {model!r} in {repository}; it has: {', '.join(known)}")
    return text_format.Parse(path.read_text(), mc.ModelConfig())


@dataclass(frozen=True)
class SearchSpace:
    """One model's search: Model Analyzer sweeps the product of the ranges given."""

    model: str
    kind: str  # KIND_CPU or KIND_GPU
    instances: tuple[int, ...]
    queue_delays_us: tuple[int, ...] = ()
    max_batch_sizes: tuple[int, ...] = ()
    preferred_batch_sizes: tuple[int, ...] = ()
    concurrency: tuple[int, ...] = (1,)

    @property
    def paths(self) -> tuple[str, ...]:
        """The config fields the search sets, which is what --apply may change."""
        paths = ["instance_group"]
        if self.max_batch_sizes:
            paths.append("max_batch_size")
        if self.queue_delays_us:
            paths.append("dynamic_batching.max_queue_delay_microseconds")
        if self.preferred_batch_sizes:
            paths.append("dynamic_batching.preferred_batch_size")
        return tuple(paths)

    def model_config_parameters(self) -> dict:
        """Model Analyzer's ``model_config_parameters`` (each list is a dimension)."""
        params: dict = {"instance_group": [{"kind": self.kind, "count": list(self.instances)}]}
        if self.max_batch_sizes:
            params["max_batch_size"] = list(self.max_batch_sizes)
        batching: dict = {}
        if self.queue_delays_us:
            batching["max_queue_delay_microseconds"] = list(self.queue_delays_us)
        if self.preferred_batch_sizes:
            batching["preferred_batch_size"] = [[size] for size in self.preferred_batch_sizes]
        if batching:
            params["dynamic_batching"] = batching
        return params

    @property
    def variant_count(self) -> int:
        count = len(self.instances)
        for values in (self.queue_delays_us, self.max_batch_sizes, self.preferred_batch_sizes):
            count *= max(1, len(values))
        return count


def derive(config: mc.ModelConfig, options: TuneOptions, cores: int, gpu: bool) -> SearchSpace:
    """The model's search space; a range the user gave replaces the derived one."""
    if config.platform == "ensemble":
        steps = ", ".join(s.model_name for s in config.ensemble_scheduling.step)
        raise TuneError(
            f"{config.name} is an ensemble: Model Analyzer profiles ensembles only in its "
            f"quick search mode, which this command does not drive; tune its steps instead "
            f"({steps})"
        )
    current = config.instance_group[0].count if config.instance_group else 1
    instances = options.instances or _upto(min(cores, MAX_DEFAULT_INSTANCES), current)
    concurrency = options.concurrency or tuple(sorted({1, cores, 4 * cores}))
    kind = instance_kind(config, gpu)
    if config.max_batch_size == 0:  # no batching: only the instance count applies
        return SearchSpace(config.name, kind, instances, concurrency=concurrency)
    delay = config.dynamic_batching.max_queue_delay_microseconds
    delays = options.queue_delays_us or tuple(sorted({*DEFAULT_QUEUE_DELAYS_US, delay}))
    return SearchSpace(
        config.name,
        kind,
        instances,
        queue_delays_us=delays,
        max_batch_sizes=options.max_batch_sizes or (),
        preferred_batch_sizes=options.preferred_batch_sizes or (),
        concurrency=concurrency,
    )


# Backends whose models run on the CPU only: python models do the CPU work (tokenise, decode,
# pad); the kit's ctranslate2 backend is built for the CPU (device "cpu"; the default nmt).
CPU_BACKENDS = ("python", "ctranslate2")


def instance_kind(config: mc.ModelConfig, gpu: bool) -> str:
    """The kind Model Analyzer sweeps, from the model's own config: python models and the
    kit's CPU-only ctranslate2 backend (the default nmt) stay KIND_CPU unless their config asks
    for a GPU; an engine moves to KIND_GPU where there is one, since the repository is built on
    CPU."""
    if not gpu:
        return "KIND_CPU"
    kinds = {mc.ModelInstanceGroup.Kind.Name(group.kind) for group in config.instance_group}
    if "KIND_GPU" in kinds or config.backend not in CPU_BACKENDS:
        return "KIND_GPU"
    return "KIND_CPU"


def _upto(limit: int, current: int) -> tuple[int, ...]:
    return tuple(sorted({*range(1, max(1, limit) + 1), current}))

"""The AOTInductor engine on the GPU: built, checked, timed in process and served natively.

    python -m triton_kit.benchmarks.gpu.aoti --out OUT --backend-lib LIB [--family FAMILY]

Issue 30 asks for a compiled engine Triton serves without the python stub. Triton's
pytorch backend loads AOTInductor packages (``platform: "torch_aoti"``) from r26.03 on;
``LIB`` is that backend built on the GPU machine (``scripts/gpu/aoti_backend.sh``) and
served under its own name, ``pytorch_aoti`` (Triton 2.51 accepts any platform for a
backend it does not know, and the backend API is the same 1.19).

``--family`` picks the model (:data:`FAMILIES`): ``resnet50`` (default; UINT8 NHWC image,
1000 logits, batch up to 256, loads at c256, report ``aoti.json``, models ``aoti_*``) or
``bert-base``/``bert-large`` (input_ids and attention_mask INT64 [128], the mean-pooled
FP32 embedding, batch up to 64, loads at c64 of one sequence each, report
``aoti-bert-base.json``, models ``bert_base_aoti_*``; perf_analyzer sends token ids within
the vocabulary from an ``--input-data`` file, as random INT64 would index past the
embedding table). Each family writes its own report, so runs can share ``--out``.

Steps (the report is rewritten after each step and each served row, so a run cut short keeps
what it measured):

1. ``build``: the module (FP16; ResNet channels_last), ``torch.export`` with a dynamic batch
   (1..max batch; BERT's sequence fixed), ``aoti_compile_and_package``. Every compile and
   link command is logged, with the libraries the package's .so needs. ``--cxx`` picks
   Inductor's C++ compiler: on the H100 machine Inductor took ``/opt/gcc/bin/g++``, whose
   link put a static libstdc++ into the .so, and that copy's ``std::regex``
   (``parse_device_str``) crashed on the process's shared-libstdc++ locale (cuda-gdb
   backtrace, gpu_aoti.md). ``--package-dir`` keeps the package, its eager outputs and its
   build record in a folder, and a later run of the same family there reuses them instead of
   building (``"reused": true`` in the build record); ``--build-only`` stops after this step.
   The module's random weights come from a fixed seed, so a reused package and the run's
   TorchScript baseline share them.
2. ``in_process``: the package loaded by ``aoti_load_package``, its outputs checked against
   the eager module's on the build's inputs (max abs diff; ResNet top-1 agreement, BERT
   cosine similarity min), then timed at batch 1 and the larger batches (ResNet 32/64/128/256,
   BERT 16/32/64: the batches a served load forms, its note's *batch*, and the largest), host
   copies included.
3. ``served``: the package through ``pytorch_aoti`` at each ``--instances`` count and
   ``--delays`` queue delay (default 2000 us; preferred ResNet 64/128/256, BERT 16/32/64,
   or none: ``--preferred``) and at 1 instance with no delay (the batch-1 row), and, for
   ResNet, TorchScript through Triton's own pytorch backend (4 instances; ``--no-baseline``
   leaves it out, and the GPU run need not build that backend), each model on a bare
   ``tritonserver`` of its own so a crash loses one row and keeps its log. The package's
   served outputs are checked first (the check inputs as concurrent one-row requests,
   batched together); then one-row
   requests through perf_analyzer at the family's concurrency for each ``--shared-memory``
   way and ``--client`` mode (a blocking thread per request, or ``--async``); the no-delay
   package at c1 inline and through system and CUDA shared memory (``--c1-shared-memory``
   picks; shared memory saves the inputs' and outputs' trip through gRPC, the batch-1 gap's
   suspect); the baseline at c1 inline. ``--c1-batcher on,off`` serves the no-delay package
   behind the dynamic batcher and without one (``..._d0_direct``: Triton's default scheduler
   hands each request to the instance itself, one thread's wake-up fewer).
   ``--warmup all`` serves each batched row a second time (``..._warm``) with Triton's
   ``model_warmup`` running every batch size 1..max on each instance before it is ready, and
   each server's load time is recorded (``<model>_load``). ``--gather 0,N`` serves each batched
   row once per threshold (``..._gN``): the config parameter ``GATHER_KERNEL_BUFFER_THRESHOLD``
   (the kit's build of the backend reads it) gathers the inputs of N or more requests already
   on the GPU (CUDA shared memory) with one kernel instead of a copy each. ``--cuda-graphs
   off,on`` serves each package row without and with Triton's ``optimization { cuda { graphs:
   true } }`` (``..._cg``; the kit's build of the backend captures a graph per batch size,
   scripts/gpu/pytorch_aoti/cuda_graphs.hh), and times in process the same package's forward
   replayed from a CUDA graph at each batch (``bs<N>_graph``), so a graphed row is compared with
   the engine's best either way; ``--c1-cuda-graphs`` makes that choice for the no-delay
   package apart (e.g. ``on`` alone while the batched rows are measured both ways).
   ``--c-api`` measures each no-delay package at c1 once more
   with Triton inside perf_analyzer (its C API, ``..._c1_capi``): the served c1 row less gRPC.

``--first-calls`` adds a step before ``served``: in a fresh thread, the package's first and
second call at every batch size 1..max. cuDNN's execution plans are cached per thread and per
shape (PyTorch's ``thread_local`` ``BenchmarkCache``), so a Triton instance thread pays a
convolution's plan building the first time the dynamic batcher hands it a batch size: the
suspect for the served rows' ~110 ms p99 stalls that faded over a run's later rows (call 22).

Modules, one job each: ``family`` (the models, :data:`FAMILIES`), ``options`` (the command
line, parsed once), ``build`` (step 1), ``in_process`` (step 2 and ``--first-calls``),
``repository`` (the served rows' models and configs), ``served`` (step 3: servers,
perf_analyzer's loads, the rows' keys), ``run`` (the steps in order, ``main``), ``report``
(a run as markdown: ``python -m triton_kit.benchmarks.gpu.aoti.report``).
"""

from triton_kit.benchmarks.gpu.aoti.family import BERT_VOCAB, FAMILIES, Family, families
from triton_kit.benchmarks.gpu.aoti.options import Options, parse
from triton_kit.benchmarks.gpu.aoti.repository import aoti_config, write_repository
from triton_kit.benchmarks.gpu.aoti.run import main
from triton_kit.benchmarks.gpu.aoti.served import (
    batch_one_row,
    load_key,
    planned_loads,
    pool_flags,
    repeated,
)

__all__ = [
    "BERT_VOCAB",
    "FAMILIES",
    "Family",
    "Options",
    "aoti_config",
    "batch_one_row",
    "families",
    "load_key",
    "main",
    "parse",
    "planned_loads",
    "pool_flags",
    "repeated",
    "write_repository",
]

"""The lent-GPU run (``scripts/gpu/bench.sh``): ``run`` writes gpu.md and gpu.json into OUT_DIR
from the families (``families``, ``rows``) under load (``load``) on models built for it
(``models``), with ``settings`` and ``report``; ``overhead`` profiles the served one-image path
(``python -m triton_kit.benchmarks.gpu.overhead``), ``nmt`` the search on torch step models
(``python -m triton_kit.benchmarks.gpu.nmt``), ``pipelines`` the kit's built repository end
to end against the same pipeline in one process (``python -m triton_kit.benchmarks.gpu.pipelines``).
Reports: results/gpu.md, results/gpu_overhead.md; raw runs in results/gpu/."""

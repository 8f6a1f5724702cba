"""What users call, end to end (issue 30 item 4): the kit's built repository served and
measured through perf_analyzer and the SDK, against the same pipeline in one process.

    python -m triton_kit.benchmarks.gpu.pipelines --out OUT [--seconds 2] [--smoke]

``options`` (the command line, parsed once), ``build`` (``python -m triton_kit.build_engines``
per family), ``inputs`` (real request data: JPEG bytes, decoded images, texts, number
phrases), ``local`` (the pipeline in one process, from the served python models' own
functions and the same TorchScript), ``served`` (perf_analyzer with Triton's statistics per
composing model, and the SDK), ``run`` (the steps, most important first, under a time
budget), ``report`` (pipelines.md).
"""

"""triton-kit: build, serve, call and load-test BERT, ResNet-50 and NMT on Triton.

One namespace so that installing the kit adds no generic top-level module (``client``,
``server``) to an application's imports. The subpackages, in the direction data flows:
``build_engines`` writes ``model_repository/``; ``server`` and ``python_models`` serve it;
``client`` (the SDK) calls it; ``loadtest`` and ``benchmarks`` measure it.

Importing this package imports nothing else: the python backend's stubs load
``triton_kit.python_models`` without the build or the SDK.
"""

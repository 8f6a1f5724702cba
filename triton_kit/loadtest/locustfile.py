"""Locust entry point: ``locust -f triton_kit/loadtest/locustfile.py --host grpc://127.0.0.1:8001``.

Opens the web dashboard (http://localhost:8089) with one user class per model family;
pick classes with ``--class-picker`` or name them on the command line
(``ResNet50User BertUser``). The Triton-kit options (weights, beam size, timeouts) appear
in the web UI's custom parameters and in ``python -m triton_kit.loadtest options``
(``locust --help`` cannot list them). A user whose model is not loaded idles with one
warning, and fewer users than classes logs which classes got none. For a headless stepped
run with reports, use ``python -m triton_kit.loadtest run``.
"""

from triton_kit.loadtest.users import BertUser, NmtUser, ResNet50User

__all__ = ["BertUser", "NmtUser", "ResNet50User"]

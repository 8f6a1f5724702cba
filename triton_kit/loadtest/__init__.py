"""Locust load tests for the kit's models, over gRPC and HTTP, on top of the client SDK.

``locust -f triton_kit/loadtest/locustfile.py --host grpc://127.0.0.1:8001`` for the web UI;
``python -m triton_kit.loadtest run`` for a headless stepped load with reports and plots.

Modules imported by the Locust process (users, corpora, resolution, shape, recorder,
triton_stats) need only locust, tritonclient, numpy and Pillow: the Locust image copies
``triton_kit/client/`` and ``triton_kit/loadtest/`` and nothing else. The report and runner
import matplotlib and ``server`` lazily.
"""

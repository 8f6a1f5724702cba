"""The Locust load generator calibrated against a plain asyncio client (``run``, rendered by
``report``, results/loadgen.md); gevent/gRPC bridges compared (``bridges``,
results/loadgen_bridges.md); the gRPC user's CPU split (``split``)."""

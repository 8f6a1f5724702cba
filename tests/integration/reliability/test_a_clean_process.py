"""Collection leaves the pytest process as Python made it (runs first: reliability/, 'a').

A test module that imports Locust at its top monkey-patches the whole process with gevent
while pytest collects; the threaded and asyncio tests after it then failed or hung (the
suite stopped in test_bert). Modules that need Locust in-process run in a subprocess
(tests/build/loadtest/test_exporter.py).
"""

from __future__ import annotations

import sys


def test_collection_leaves_the_process_unpatched_by_gevent() -> None:
    monkey = sys.modules.get("gevent.monkey")
    patched = [m for m in ("threading", "socket", "time") if monkey and monkey.is_module_patched(m)]
    assert not patched, f"gevent patched {patched} during collection: a test imports Locust"

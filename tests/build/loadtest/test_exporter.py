"""The Locust exporter's cases (tests/build/loadtest/exporter_cases.py), in their own interpreter.

Importing Locust monkey-patches the whole process with gevent; in the main pytest process
that made the later asyncio and threaded tests hang (the suite stopped in test_bert). The
cases need Locust in-process, so they run apart.
"""

from __future__ import annotations

import subprocess
import sys

from tests.support.prerequisites import PROJECT_ROOT

ROOT = PROJECT_ROOT


def test_exporter_cases_pass_in_a_clean_interpreter() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/build/loadtest/exporter_cases.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]

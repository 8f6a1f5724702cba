"""Block until an HTTP endpoint answers 200, e.g. Triton's /v2/health/ready.

Used by the Locust master: the compose file cannot make it depend on `triton` with
`service_healthy`, because the server is a different service in the gpu and cpu profiles.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request


def is_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        help="seconds to keep trying; 0 checks once (default 1800)",
    )
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.timeout
    next_note = 0.0
    while True:
        if is_ready(args.url):
            print(f"ready: {args.url}", flush=True)
            return 0
        now = time.monotonic()
        if now >= deadline:
            print(f"not ready: {args.url} (waited {args.timeout:.0f} s)", file=sys.stderr)
            return 1
        if now >= next_note:
            print(
                f"waiting for {args.url} (is a server profile up? --profile gpu or cpu)",
                flush=True,
            )
            next_note = now + 30
        time.sleep(min(2.0, max(deadline - now, 0.0)))


if __name__ == "__main__":
    sys.exit(main())

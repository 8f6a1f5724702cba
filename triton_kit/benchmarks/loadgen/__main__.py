"""``python -m triton_kit.benchmarks.loadgen``: calibrate, then render the report
(triton_kit.benchmarks.loadgen.report).

Kept apart from the measurements (``run``) so the report can import their names without
the measurements importing the report back."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
import time

from triton_kit.benchmarks.loadgen.report import report
from triton_kit.benchmarks.loadgen.run import calibrate, parse_args, plain_loop


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "plain":
        print(json.dumps(asyncio.run(plain_loop(args.url, args.concurrency, args.duration))))
        return 0
    from triton_kit.loadtest.sidecar.client import BUILD_SCRIPT, native_path

    if "grpc" in args.protocols and not native_path().is_file():
        print(
            f"triton_kit.benchmarks.loadgen: no native gRPC sidecar at {native_path()}: "
            f"run {BUILD_SCRIPT}"
        )
        return 2
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    begin = time.monotonic()
    text = report(calibrate(args), args, started)
    args.output.write_text(text)
    print(text)
    print(f"wrote {args.output} in {time.monotonic() - begin:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a device call carries, counted so that a carry the call would refuse is refused here.

The working tree that travels is the checkout's tracked and untracked-not-ignored files plus
the carried paths, at most 64 MiB. The call counts more than the files' bytes: in session 45 it
refused a pipelines carry whose files came to 63.5 MiB with the checkout. Counted as a tar (a
512-byte header a file, its content padded to 512 bytes) that tree came to 64.7 MiB, and in
plain bytes to 66.6 MB. So both are checked: the tar count against 64 MiB and the bytes against
64 million. Exit status 1 when either is over.

    python3 scripts/gpu/carry_size.py .whl-goals [--limit-mib 64]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

BLOCK = 512
MIB = 1 << 20


def checkout_files(root: Path) -> list[Path]:
    """Tracked and untracked-not-ignored files, as git lists them."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    names = dict.fromkeys(name for name in listed.decode().split("\0") if name)
    return [root / name for name in names if (root / name).is_file()]


def carried_files(paths: list[Path]) -> list[Path]:
    return [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*"))) if f.is_file()]


def tar_bytes(size: int) -> int:
    return BLOCK + -(-size // BLOCK) * BLOCK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("carry", nargs="+", type=Path, help="the paths the call carries")
    parser.add_argument("--root", type=Path, default=Path("."), help="the checkout (default .)")
    parser.add_argument("--limit-mib", type=float, default=64.0)
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.carry if not path.exists()]
    if missing:
        parser.error(f"not there: {', '.join(missing)} (a path the call would carry)")
    # a carried path git does not ignore is in both lists: it travels once
    files = list(dict.fromkeys(f.resolve() for f in checkout_files(args.root)
                               + carried_files(args.carry)))  # fmt: skip
    sizes = [f.stat().st_size for f in files]
    as_tar = sum(map(tar_bytes, sizes)) / MIB
    plain_mb = sum(sizes) / 1e6
    over = as_tar > args.limit_mib or plain_mb > args.limit_mib
    print(f"carry and checkout: {as_tar:.1f} MiB counted as a tar, {plain_mb:.1f} MB in bytes "
          f"(each at most {args.limit_mib:g}){': too much to carry' if over else ''}")  # fmt: skip
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())

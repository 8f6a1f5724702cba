"""scripts/gpu/carry_size.py: a carry the device call would refuse is refused before the call.
In session 45 prepare_goals.sh summed the files' bytes, said 63 MiB (at most 64), and the call
refused the tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts/gpu/carry_size.py"


def _checkout(root: Path) -> Path:
    """A checkout with a tracked file, an untracked one, an ignored one, and a carry folder."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("ignored.bin\n")  # 12 bytes, untracked
    (root / "tracked.txt").write_bytes(b"x")
    subprocess.run(["git", "-C", str(root), "add", "tracked.txt"], check=True)
    (root / "untracked.bin").write_bytes(b"u" * 513)
    (root / "ignored.bin").write_bytes(b"i" * 10_000)
    carry = root / "carry"
    (carry / "sub").mkdir(parents=True)
    (carry / "empty").write_bytes(b"")
    (carry / "sub" / "kib").write_bytes(b"k" * 1024)
    return carry


def _run(root: Path, carry: Path, limit_mib: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(carry), "--root", str(root), "--limit-mib",
         str(limit_mib)], capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_each_file_counts_a_header_and_its_content_padded_to_whole_blocks(tmp_path: Path) -> None:
    carry = _checkout(tmp_path)
    done = _run(tmp_path, carry, 64)
    # .gitignore 12 -> 1024, tracked 1 -> 1024, untracked 513 -> 1536, empty 0 -> 512,
    # kib 1024 -> 1536; the ignored file does not travel
    expected_mib = (1024 + 1024 + 1536 + 512 + 1536) / 2**20
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{expected_mib:.1f} MiB counted as a tar" in done.stdout


def test_a_tree_whose_bytes_fit_but_whose_tar_does_not_is_refused(tmp_path: Path) -> None:
    carry = _checkout(tmp_path)
    bytes_only = (12 + 1 + 513 + 0 + 1024) / 2**20  # 1,550 bytes
    as_tar = 5632 / 2**20
    done = _run(tmp_path, carry, (bytes_only + as_tar) / 2)
    assert done.returncode == 1 and "too much to carry" in done.stdout
    assert _run(tmp_path, carry, as_tar * 1.01).returncode == 0


def test_a_carry_path_that_is_not_there_is_refused_not_counted_as_empty(tmp_path: Path) -> None:
    _checkout(tmp_path)
    done = _run(tmp_path, tmp_path / "no-such-carry", 64)
    assert done.returncode == 2 and "no-such-carry" in done.stderr and "not there" in done.stderr

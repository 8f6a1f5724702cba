"""The ctranslate2 backend's text mode, its string helpers against Python's own behaviour
(``ctranslate2/src/text.h``): UTF-8 checking as ``bytes.decode`` reports it, ``str.strip()``,
and detokenising as ``MarianText.decode`` does, special tokens included (the served tests'
number model never emits ``<unk>``). Built from the backend's CMake tree as a probe
(``triton-ctranslate2-text-probe``), fed many generated cases at once."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT
from triton_kit.python_models.nmt.text import MarianText

pytestmark = pytest.mark.slow

PROBE = "triton-ctranslate2-text-probe"


@pytest.fixture(scope="module")
def probe() -> Path:
    """The probe, built in the ctranslate2 backend's CMake tree (the backend rebuilt first
    where that tree is gone)."""
    from triton_kit.server.native_backends import default_out
    from triton_kit.server.native_backends.__main__ import main
    from triton_kit.server.native_backends.build import missing_tools

    missing = missing_tools()
    if missing:
        pytest.skip(f"cannot build the ctranslate2 backend: {', '.join(missing)} not found")
    build_dir = default_out() / ".work" / "build-ctranslate2"
    assert main(["build", "ctranslate2", *([] if build_dir.is_dir() else ["--force"])]) == 0
    done = subprocess.run(
        ["cmake", "--build", str(build_dir), "--target", PROBE],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return build_dir / PROBE


def _run(probe: Path, lines: list[str]) -> list[bytes]:
    done = subprocess.run(
        [str(probe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True
    )
    return [bytes.fromhex(line) for line in done.stdout.splitlines()]


def _hex(data: bytes) -> str:
    return data.hex() or "-"


def _python_problem(data: bytes) -> bytes:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"{exc.reason} at byte {exc.start}".encode()
    return b""


def _byte_strings(count: int) -> list[bytes]:
    """Short strings from the bytes where UTF-8's rules have edges (lead bytes, their second
    byte's limits, continuation bytes, ASCII)."""
    edges = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF]
    edges += [0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF]
    rng = random.Random(0)
    return [bytes(rng.choice(edges) for _ in range(rng.randint(0, 6))) for _ in range(count)]


def test_utf8_problems_are_pythons(probe: Path) -> None:
    cases = _byte_strings(4000)
    cases += [
        b"seven \xff",
        b"seven \xe2\x82",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
        "é€😀".encode(),
    ]
    got = _run(probe, [f"utf8 {_hex(c)}" for c in cases])
    expected = [_python_problem(c) for c in cases]
    assert sum(bool(e) for e in expected) > 1000 and sum(not e for e in expected) > 100
    wrong = [(c, g, e) for c, g, e in zip(cases, got, expected, strict=True) if g != e]
    assert not wrong, wrong[:5]


def test_strip_is_pythons(probe: Path) -> None:
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    spaces += ["\u200b", "\ufeff", "\u180e", "\u2581"]  # not whitespace to Python
    rng = random.Random(1)
    cases = [
        "".join(rng.choice([*spaces, "a", "é", "x y"]) for _ in range(rng.randint(0, 5)))
        for _ in range(2000)
    ]
    got = _run(probe, [f"strip {_hex(c.encode())}" for c in cases])
    wrong = [(c, g) for c, g in zip(cases, got, strict=True) if g != c.strip().encode()]
    assert not wrong, wrong[:5]


def test_detokenising_is_marian_texts(probe: Path) -> None:
    """Random token sequences of the number model's vocabulary (its special tokens among
    them): the same text as ``MarianText.decode`` of their ids."""
    text = MarianText(DEFAULT_CHECKPOINT, 128)
    tokens = list(text.vocab)
    assert {"</s>", "<unk>", "<pad>"} <= set(tokens)
    rng = random.Random(2)
    cases = [[rng.choice(tokens) for _ in range(rng.randint(0, 8))] for _ in range(2000)]
    cases += [["\u2581cent", "<unk>", "\u2581un", "</s>"], ["<pad>"], []]
    got = _run(probe, [" ".join(["detok", *(_hex(t.encode()) for t in c)]) for c in cases])
    expected = [text.decode([text.vocab[t] for t in c]).encode() for c in cases]
    wrong = [(c, g, e) for c, g, e in zip(cases, got, expected, strict=True) if g != e]
    assert not wrong, wrong[:5]
    assert got[-3] == b"cent un"

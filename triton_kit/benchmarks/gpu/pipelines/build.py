"""The kit's repository, built with the kit's own command, one family at a time:
``python -m triton_kit.build_engines <family> --engine torch ...`` in a child process (its log
beside the report), FP16 where a GPU is visible (the torch engine's FP16 needs one), every
other setting the family's default (``families/resnet50.py`` gives a GPU build its measured
batching; BERT and NMT keep theirs).

What each build needs, with no download: ResNet-50 from transformers' configuration (random
weights); BERT in all-MiniLM-L6-v2's shape (random weights) with a tokenizer.json (the
installed default checkpoint's, or ``--tokenizer``); NMT the committed number model. On this
2-core CPU machine they took 16, 9 and 6 s.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from triton_kit.benchmarks.gpu.pipelines.options import Options

BERT_SHAPE = "minilm-l6"  # all-MiniLM-L6-v2's: 6 layers, hidden 384
BERT_MAX_LENGTH = 256  # all-MiniLM-L6-v2's own
SMOKE_BERT_MAX_LENGTH = 64
BUILD_TIMEOUT_S = 600


@dataclass(frozen=True)
class Build:
    """One ``python -m triton_kit.build_engines`` command."""

    family: str
    argv: tuple[str, ...]

    @property
    def command(self) -> str:
        return shlex.join(["python", "-m", "triton_kit.build_engines", *self.argv])


def plan(family: str, options: Options, repo: Path, work: Path, gpu: bool) -> Build:
    """The command that builds ``family`` into ``repo``."""
    common = ["--engine", "torch", "--output-repository", str(repo), "--work-dir", str(work)]
    precision = ["--precision", "fp16" if gpu else "fp32"]
    if family == "resnet50":
        argv = ["resnet50", *common, *precision]
        if options.smoke:  # the same build on a tiny ResNet: seconds on 2 CPU cores
            argv += ["--checkpoint", str(tiny_resnet(work / "tiny-resnet"))]
    elif family == "bert":
        length = SMOKE_BERT_MAX_LENGTH if options.smoke else BERT_MAX_LENGTH
        argv = ["bert", *common, *precision, "--shape", BERT_SHAPE, "--max-length", str(length)]
        if options.tokenizer is not None:  # the shape's tokenizer: <dir>/tokenizer.json
            argv += ["--checkpoint", str(options.tokenizer.parent)]
    elif family == "nmt":
        argv = ["nmt", *common]  # the committed number model, fp32, the python search
    else:
        raise ValueError(f"no build for {family!r}")
    return Build(family, tuple(argv))


def tiny_resnet(folder: Path) -> Path:
    """A Hugging Face ResNet checkpoint with 1000 classes and tiny stages (random weights),
    for ``--checkpoint`` in the smoke run."""
    from triton_kit.benchmarks.gpu.models import _resnet

    if not (folder / "config.json").exists():
        _resnet(tiny=True).save_pretrained(str(folder))
    return folder


def run_build(build: Build, log: Path) -> dict:
    """Runs the command; its output goes to ``log``. Raises with the log's tail on failure."""
    start = time.perf_counter()
    with log.open("w") as sink:
        done = subprocess.run(
            [sys.executable, "-m", "triton_kit.build_engines", *build.argv],
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    seconds = round(time.perf_counter() - start, 1)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(f"{build.command} exited {done.returncode} after {seconds} s:\n{tail}")
    return {"command": build.command, "seconds": seconds, "log": log.name}

"""The NMT benchmark's closed loops: a cell of one engine at one beam size and concurrency,
the micro-batcher that gives the in-process engines the batching Triton's dynamic batcher gives
the served model, and the held-out sentences and token count every engine is measured on."""

from __future__ import annotations

import dataclasses
import itertools
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import sentencepiece as spm

from triton_kit.build_engines.families.nmt import corpus
from triton_kit.build_engines.families.nmt.repository import BLS
from triton_kit.build_engines.families.nmt.train import DEFAULT_CHECKPOINT

MAX_BATCH = 32
PLACEHOLDER = re.compile(r"<x\d+>")  # the large model's placeholder pieces

# texts, beam, on_done(index, text) -> None
BatchFn = Callable[[Sequence[str], int, Callable[[int, str], None]], None]


@dataclass(frozen=True)
class Cell:
    engine: str
    beam: int
    concurrency: int
    latencies_s: tuple[float, ...]
    wall_s: float
    tokens: int
    outputs: tuple[str, ...]
    exact: float | None  # against the reference translations, where there are some
    phases: dict[str, float] = field(default_factory=dict)  # where the time went

    @property
    def sentences_per_s(self) -> float:
        return len(self.latencies_s) / self.wall_s

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s

    def ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q) * 1000)


class MicroBatcher:
    """Gathers concurrent requests into one batch call, like Triton's dynamic batcher."""

    def __init__(self, run: BatchFn, beam: int) -> None:
        self.run, self.beam = run, beam
        self.queue: queue.Queue[tuple[str, Future] | None] = queue.Queue()
        self.worker = threading.Thread(target=self._loop, daemon=True)
        self.worker.start()

    def __call__(self, text: str) -> str:
        future: Future = Future()
        self.queue.put((text, future))
        return future.result()

    def close(self) -> None:
        self.queue.put(None)
        self.worker.join()

    def _loop(self) -> None:
        while (first := self.queue.get()) is not None:
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self.queue.put(None)
                    break
                batch.append(item)
            futures = [f for _, f in batch]
            try:
                self.run([t for t, _ in batch], self.beam, partial(_resolve, futures))
            except Exception as error:  # the callers get it; a dead worker would hang them
                for future in futures:
                    if not future.done():
                        future.set_exception(error)


def _resolve(futures: list[Future], index: int, text: str) -> None:
    futures[index].set_result(text)


def measure(
    engine: str,
    call_factory: Callable[[], Callable[[str], str]],
    beam: int,
    concurrency: int,
    pairs: list[tuple[str, str | None]],
    count_tokens: Callable[[str], int],
    after_warmup: Callable[[], object] | None = None,
) -> Cell:
    """``concurrency`` client threads, each with its own ``call``, share ``pairs``."""
    calls = [call_factory() for _ in range(concurrency)]
    for call in calls[:2]:
        call(pairs[0][0])  # warm-up
    if after_warmup is not None:
        after_warmup()
    counter = itertools.count()
    latencies: list[float] = []
    outputs: dict[int, str] = {}
    lock = threading.Lock()

    def client(call: Callable[[str], str]) -> None:
        while (index := next(counter)) < len(pairs):
            start = time.perf_counter()
            out = call(pairs[index][0])
            with lock:
                latencies.append(time.perf_counter() - start)
                outputs[index] = out

    threads = [threading.Thread(target=client, args=(c,)) for c in calls]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    texts = tuple(outputs[i] for i in range(len(pairs)))
    exact = None
    if pairs[0][1] is not None:
        exact = float(np.mean([t == ref for t, (_, ref) in zip(texts, pairs, strict=True)]))
    tokens = sum(count_tokens(t) for t in texts)
    return Cell(engine, beam, concurrency, tuple(latencies), wall, tokens, texts, exact)


def batcher_factory(run: BatchFn, beam: int, created: list[MicroBatcher]):
    batcher = MicroBatcher(run, beam)
    created.append(batcher)
    return lambda: batcher


def measure_local(name: str, engine: BatchFn, beam: int, level: int, pairs, count_tokens) -> Cell:
    created: list[MicroBatcher] = []
    cell = measure(name, batcher_factory(engine, beam, created), beam, level, pairs, count_tokens)
    for batcher in created:
        batcher.close()
    return cell


def held_out_pairs(with_references: bool = True) -> list[tuple[str, str | None]]:
    """The default model's held-out English sources (and French references): both
    architectures' test sentences (the recurrent model is trained on the same split)."""
    split = corpus.Split.load(DEFAULT_CHECKPOINT / "split.json")
    return [(corpus.english(n), corpus.french(n) if with_references else None) for n in split.test]


def count_tokens_for(repository: Path, model: str = BLS) -> Callable[[str], int]:
    """Target tokens + ``</s>`` of the served ``model``'s vocabulary; the large model's
    placeholder pieces (``<x123>``) count one."""
    target = spm.SentencePieceProcessor(model_file=str(repository / model / "1" / "target.spm"))

    def count(text: str) -> int:
        placeholders = len(PLACEHOLDER.findall(text))
        rest = PLACEHOLDER.sub("", text)
        return placeholders + (len(target.encode(rest)) if rest.strip() else 0) + 1

    return count


def with_phases(cell: Cell, phases: dict[str, float]) -> Cell:
    return dataclasses.replace(cell, phases=phases)


def median_cell(cells: list[Cell]) -> Cell:
    """The repeat with the median throughput (its latencies and phases come with it)."""
    return sorted(cells, key=lambda c: c.sentences_per_s)[len(cells) // 2]

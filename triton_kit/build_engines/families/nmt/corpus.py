"""The default model's data: English number phrases → French number phrases.

No pretrained translation weights can be downloaded here, so the project trains
its own small Marian model on a task with exact answers (``num2words``). The
held-out split is fixed by a seed and written beside the checkpoint, so quality
figures are reproducible and the test numbers are never trained on.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from num2words import num2words

MAX_NUMBER = 999_999
SPLIT_SEED = 20241122
TEST_SIZE = 500
VALID_SIZE = 500
# The committed number models trained on this corpus: Marian, and the recurrent one (which
# shares the Marian checkpoint's vocabularies, split and generation rules).
DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[4] / "assets" / "nmt-en-fr-numbers"
DEFAULT_RNN_CHECKPOINT = DEFAULT_CHECKPOINT.parent / "nmt-rnn-en-fr-numbers"


def english(number: int) -> str:
    return num2words(number, lang="en")


def french(number: int) -> str:
    return num2words(number, lang="fr")


@dataclass(frozen=True)
class Split:
    """Which numbers are held out: ``test`` for the quality bar, ``valid`` for training checks."""

    seed: int
    test: tuple[int, ...]
    valid: tuple[int, ...]

    def held_out(self) -> set[int]:
        return set(self.test) | set(self.valid)

    def save(self, path: Path) -> None:
        payload = {
            "description": "English→French number phrases (num2words 'en'→'fr'); never trained on",
            "seed": self.seed,
            "range": [0, MAX_NUMBER],
            "test": list(self.test),
            "valid": list(self.valid),
        }
        path.write_text(json.dumps(payload, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Split:
        payload = json.loads(Path(path).read_text())
        return cls(payload["seed"], tuple(payload["test"]), tuple(payload["valid"]))


def make_split(seed: int = SPLIT_SEED) -> Split:
    """Uniform over 0..999,999, like the numbers a user would ask for."""
    rng = random.Random(seed)
    drawn = rng.sample(range(MAX_NUMBER + 1), TEST_SIZE + VALID_SIZE)
    return Split(seed, tuple(drawn[:TEST_SIZE]), tuple(drawn[TEST_SIZE:]))


def training_numbers(split: Split, count: int, seed: int) -> list[int]:
    """Mostly uniform numbers, plus some drawn per digit count so short ones are seen too."""
    rng = random.Random(seed)
    excluded = split.held_out()
    numbers: list[int] = []
    while len(numbers) < count:
        if rng.random() < 0.8:
            number = rng.randint(0, MAX_NUMBER)
        else:
            digits = rng.randint(1, 6)
            number = rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10**digits - 1)
        if number not in excluded:
            numbers.append(number)
    return numbers


def pairs(numbers: list[int]) -> list[tuple[str, str]]:
    return [(english(n), french(n)) for n in numbers]

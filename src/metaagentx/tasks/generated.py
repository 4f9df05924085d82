"""Seeded easy arithmetic and word problems with exact answers, for demos and tiny models.

Kinds: ``arith`` (one-digit addition), ``mult`` (one-digit multiplication), ``word`` (one-step
word problems: "Tom has 7 apples and buys 6 more. ..."), ``mixed`` (the three interleaved at
random). The same (kind, seed) always gives the same problems, and a shorter list is a prefix
of a longer one. Loaded with ``load_tasks("generated:arith", limit=50, seed=1)``, e.g.
``metaagentx train --data.train=generated:mixed``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from metaagentx.types import Task

KINDS = ("arith", "mult", "word", "mixed")

_NAMES = ["Tom", "Sara", "Ben", "Mia", "Leo", "Ana", "Sam", "Lily", "Max", "Zoe"]
_ITEMS = ["apples", "pencils", "marbles", "cookies", "stickers", "books", "balls", "cards"]
_BOXES = ["boxes", "bags", "baskets", "rows", "plates"]


def _arith(rng: random.Random) -> tuple[str, int, str]:
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    return f"What is {a} + {b}?", a + b, "arith"


def _mult(rng: random.Random) -> tuple[str, int, str]:
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    return f"What is {a} * {b}?", a * b, "mult"


def _word(rng: random.Random) -> tuple[str, int, str]:
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    form = rng.randrange(3)
    if form == 0:
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        text = f"{name} has {a} {item} and buys {b} more. How many {item} does {name} have now?"
        return text, a + b, "word_add"
    if form == 1:
        a = rng.randint(2, 9)
        b = rng.randint(1, a)
        text = (
            f"{name} had {a} {item} and gave {b} to a friend. "
            f"How many {item} does {name} have left?"
        )
        return text, a - b, "word_sub"
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    box = rng.choice(_BOXES)
    text = f"There are {a} {box} with {b} {item} in each. How many {item} are there in total?"
    return text, a * b, "word_mult"


_MAKERS: dict[str, Callable[[random.Random], tuple[str, int, str]]] = {
    "arith": _arith,
    "mult": _mult,
    "word": _word,
}


def generate_tasks(kind: str, *, count: int = 200, seed: int = 0) -> list[Task]:
    """Make ``count`` problems of ``kind`` (arith | mult | word | mixed) from ``seed``."""
    if kind not in KINDS:
        raise ValueError(f"unknown generated kind {kind!r}; choose one of {', '.join(KINDS)}")
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    rng = random.Random(f"{kind}:{seed}")
    tasks = []
    for i in range(count):
        maker = _MAKERS[rng.choice(("arith", "mult", "word"))] if kind == "mixed" else _MAKERS[kind]
        text, answer, sub = maker(rng)
        tasks.append(
            Task(
                id=f"generated-{kind}-{seed}-{i:05d}",
                prompt=text,
                kind="math",
                answer=str(answer),
                source=f"generated:{kind}",
                meta={"generated_kind": sub, "seed": seed},
            )
        )
    return tasks

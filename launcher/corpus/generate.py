"""The tiny corpus the local road trains on: short notes about TPU slices, checkpoints and
arithmetic, written by this project from templates with a fixed seed (no outside text, so no
licence but the project's own). Each note is unique (it carries its number), shorter than the
demo model's 128-token context in UTF-8 bytes, and regular enough that a tiny model's held-out
loss falls within a few steps.

    python -m launcher.corpus.generate   # rewrites tiny/*.jsonl (and the instruction set)
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from launcher.corpus.words import NUMBERS, SLICES, THINGS, VERBS

CORPUS_DIR = Path(__file__).parent / "tiny"
DOCUMENTS = 3000
FILES = 3
SEED = 20261125


def _note(rng: random.Random, number: int) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        a, b = rng.randrange(10), rng.randrange(9)
        return f"Note {number}: {NUMBERS[a]} plus {NUMBERS[b]} is {NUMBERS[a + b]}."
    if kind == 1:
        name, hosts, chips = rng.choice(SLICES)
        return f"Note {number}: a {name} slice has {hosts} hosts of {chips} chips."
    if kind == 2:
        thing, verb, other = rng.choice(THINGS), rng.choice(VERBS), rng.choice(THINGS)
        return f"Note {number}: the {thing} {verb} the {other}."
    step = rng.randrange(1, 50) * 10
    return f"Note {number}: the job saved step {step} and resumed at step {step + 1}."


def documents() -> list[str]:
    rng = random.Random(SEED)
    return [_note(rng, n) for n in range(DOCUMENTS)]


def files() -> dict[str, str]:
    """File name -> its JSONL text: the documents dealt round-robin into FILES files."""
    docs = documents()
    return {
        f"notes-{i}.jsonl": "".join(json.dumps({"text": d}) + "\n" for d in docs[i::FILES])
        for i in range(FILES)
    }


def main() -> None:
    from launcher.corpus import instructions

    corpora = {CORPUS_DIR: files(), instructions.INSTRUCTIONS_DIR: instructions.files()}
    for directory, written in corpora.items():
        directory.mkdir(exist_ok=True)
        for name, text in written.items():
            (directory / name).write_text(text)


if __name__ == "__main__":
    main()

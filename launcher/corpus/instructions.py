"""The tiny instruction set the local road fine-tunes on (SFT): questions about the tiny corpus's
world (arithmetic in words, TPU slices' hosts and chips, words to repeat), each answered in one
format, `Answer: <word>.`, written by this project from templates (no outside text, so no
licence but the project's own). A tiny model learns the format within tens of steps, so a
fine-tuned run can be told from its base by a rule: does its reply start with ANSWER_PREFIX?

    python -m launcher.corpus.generate   # rewrites tiny-sft/*.jsonl too; a test holds it
"""

from __future__ import annotations

import json
from pathlib import Path

from launcher.corpus.words import NUMBERS, SLICES, THINGS, VERBS

INSTRUCTIONS_DIR = Path(__file__).parent / "tiny-sft"
FILE = "instructions.jsonl"
ANSWER_PREFIX = "Answer: "


def examples() -> list[dict[str, str]]:
    """Every question the templates make, once each, in a fixed order."""
    out = []
    for a in range(10):
        for b in range(9):
            out.append((f"What is {NUMBERS[a]} plus {NUMBERS[b]}?", NUMBERS[a + b]))
    for name, hosts, chips in SLICES:
        out.append((f"How many hosts has a {name} slice?", NUMBERS[hosts]))
        out.append((f"How many chips has each host of a {name} slice?", NUMBERS[chips]))
    for word in [*THINGS, *VERBS, *NUMBERS]:
        out.append((f"Repeat the word {word}.", word))
        out.append((f"Say {word} once.", word))
    return [{"prompt": q, "completion": f"{ANSWER_PREFIX}{a}."} for q, a in out]


def files() -> dict[str, str]:
    return {FILE: "".join(json.dumps(e) + "\n" for e in examples())}

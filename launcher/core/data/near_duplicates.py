"""Near duplicates by MinHash and LSH bands (Broder 1997; Leskovec, Rajaraman and Ullman, Mining
of Massive Datasets, ch. 3), the rule `data prepare --near-duplicates THRESHOLD` applies on a
workstation and on a cluster alike:

a document's shingles are its runs of SHINGLE_WORDS words; its signature the minimum of each of
PERMUTATIONS hash permutations over them; the signature is cut into bands of rows, and a
document is a near duplicate when one of its bands equals the same band of an earlier document
(one kept, or itself a near duplicate; never an empty one or an exact duplicate). Bands and
rows are chosen so that two documents whose shingles' Jaccard similarity is the threshold share
a band with probability about one half; a pair well above it almost surely does, one well
below almost never. No pair is compared beyond its bands: what a band holds is all that is
kept of a document, 8 bytes each.
"""

from __future__ import annotations

import hashlib
from functools import cache

import numpy as np

PERMUTATIONS = 128
SHINGLE_WORDS = 5
_PRIME = (1 << 61) - 1  # the Mersenne prime the permutations work modulo (as datasketch)
_MAX_HASH = (1 << 32) - 1


def bands_for(threshold: float) -> tuple[int, int]:
    """(bands, rows) within PERMUTATIONS whose S-curve (1/bands)^(1/rows) is nearest the
    threshold."""
    pairs = [(b, PERMUTATIONS // b) for b in range(1, PERMUTATIONS + 1)]
    return min(pairs, key=lambda br: (abs((1 / br[0]) ** (1 / br[1]) - threshold), -br[0]))


@cache
def _permutations() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(1)  # fixed: every host draws the same permutations
    a = rng.randint(1, _PRIME, size=PERMUTATIONS, dtype=np.uint64)
    b = rng.randint(0, _PRIME, size=PERMUTATIONS, dtype=np.uint64)
    return a, b


def _shingles(text: str) -> np.ndarray:
    words = text.split()
    runs = {
        " ".join(words[i : i + SHINGLE_WORDS])
        for i in range(max(1, len(words) - SHINGLE_WORDS + 1))
    }
    return np.array(
        [
            int.from_bytes(hashlib.blake2b(r.encode(), digest_size=4).digest(), "little")
            for r in runs
        ],
        dtype=np.uint64,
    )


def band_keys(text: str, threshold: float) -> np.ndarray:
    """The document's band keys (uint64, one per band; the band's index is in its key, so the
    keys of all bands can share one set)."""
    a, b = _permutations()
    with np.errstate(over="ignore"):  # the products wrap, the same way on every host
        hashed = (np.outer(_shingles(text), a) + b) % _PRIME & _MAX_HASH
    signature = hashed.min(axis=0)
    bands, rows = bands_for(threshold)
    return np.array(
        [
            int.from_bytes(
                hashlib.blake2b(
                    band.to_bytes(2, "little")
                    + signature[band * rows : (band + 1) * rows].tobytes(),
                    digest_size=8,
                ).digest(),
                "little",
            )
            for band in range(bands)
        ],
        dtype=np.uint64,
    )


def near_duplicate_mask(keys: np.ndarray) -> np.ndarray:
    """Which documents (rows of `keys`, in source order, one column per band) share a band with
    an earlier one: the same answer as NearDuplicates.seen, one document after another."""
    if not len(keys):
        return np.zeros(0, dtype=bool)
    flat = keys.reshape(-1)
    _, first = np.unique(flat, return_index=True)
    is_first = np.zeros(flat.shape, dtype=bool)
    is_first[first] = True
    return ~is_first.reshape(keys.shape).all(axis=1)


class NearDuplicates:
    """The rule one document after another (the workstation's path)."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._seen: set[int] = set()

    def seen(self, text: str) -> bool:
        keys = {int(k) for k in band_keys(text, self.threshold)}
        found = not keys.isdisjoint(self._seen)
        self._seen |= keys
        return found

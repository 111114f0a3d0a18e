"""Levenshtein distance and the edit-distance near miss of a name."""

from __future__ import annotations

import random
import string


def distance(a: str, b: str) -> int:
    """Levenshtein distance: the fewest single-character insertions, deletions and substitutions
    turning ``a`` into ``b`` (dynamic programme, O(|a|·|b|))."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def near_miss(name: str, k: int, rng: random.Random, *, attempts: int = 200) -> str:
    """``name`` mutated to Levenshtein distance exactly ``k`` by substituting ``k`` letters at
    distinct positions with other lowercase letters (case kept); spaces and punctuation are not
    touched. Substitutions can land closer than ``k`` (e.g. a swap), so candidates are drawn from
    ``rng`` until one is exactly ``k`` away."""
    letters = [i for i, c in enumerate(name) if c.isalpha()]
    if k < 1 or k > len(letters):
        raise ValueError(f"cannot move {name!r} to edit distance {k}: it has {len(letters)} letters")
    for _ in range(attempts):
        chars = list(name)
        for i in rng.sample(letters, k):
            lower = chars[i].lower()
            new = rng.choice([c for c in string.ascii_lowercase if c != lower])
            chars[i] = new.upper() if chars[i].isupper() else new
        candidate = "".join(chars)
        if distance(name, candidate) == k:
            return candidate
    raise ValueError(f"no near miss of {name!r} at edit distance {k} after {attempts} attempts")

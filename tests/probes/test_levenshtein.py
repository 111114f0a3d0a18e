"""Levenshtein distance against brute force, and near misses at exact distances."""

from __future__ import annotations

import itertools
import random

import pytest

from steadyrank.serve.tools.probes.levenshtein import distance, near_miss

ALPHABET = "ab"


def brute_force(a: str, b: str) -> int:
    """Breadth-first search over single edits (insert, delete, substitute) from ``a`` to ``b``."""
    alphabet = sorted(set(ALPHABET + a + b))
    frontier, seen, steps = {a}, {a}, 0
    while b not in frontier:
        nxt = set()
        for s in frontier:
            for i in range(len(s) + 1):
                nxt.update(s[:i] + c + s[i:] for c in alphabet)
                if i < len(s):
                    nxt.add(s[:i] + s[i + 1:])
                    nxt.update(s[:i] + c + s[i + 1:] for c in alphabet)
        frontier = nxt - seen
        seen |= frontier
        steps += 1
    return steps


def strings(max_len: int):
    for n in range(max_len + 1):
        yield from ("".join(p) for p in itertools.product(ALPHABET, repeat=n))


def test_distance_matches_brute_force_on_all_short_strings():
    words = list(strings(4))
    for a in words:
        for b in words:
            assert distance(a, b) == brute_force(a, b), (a, b)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_near_miss_is_exactly_k_away_and_deterministic(k):
    for name in ["Alice Dupont", "Zoé Lefèvre", "Bo Li", "Jean-Pierre Martin"]:
        first = near_miss(name, k, random.Random(7))
        assert distance(name, first) == k
        assert first == near_miss(name, k, random.Random(7))
        assert [c.isupper() for c in first] == [c.isupper() for c in name]


def test_near_miss_refuses_too_short_names():
    with pytest.raises(ValueError, match="edit distance 3"):
        near_miss("Al", 3, random.Random(0))

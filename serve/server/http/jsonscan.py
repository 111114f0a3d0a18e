"""The values a JSON body holds, counted without parsing it (``limits.max_body_values``).

Parsing and validating a body costs per value, not per byte: pydantic's parser builds its tree at
~120 bytes a node and its validation spends ~1 µs (and an error object) on each bad one, all on the
event loop, so ``[{},{},…]`` (one value per 3 bytes) costs ~320 MiB and seconds before any count
limit of the schema can apply. The count bounds that before the parser runs.

Count: 1 for the body, plus one per array element and object member, where an empty array or
object counts one, i.e. ``1 + Σ max(len(container), 1)`` over the body's arrays and objects. In the
text it is one more than the number of ``[``, ``{`` and ``,`` outside strings (every element or
member follows one of them), found with vectorised numpy passes over the bytes: strings are the
spans between unescaped quotes (a quote is escaped when an odd run of backslashes precedes it). For
a text that is not valid JSON the count is what those characters give (the parser refuses it anyway).
A body of n bytes holds at most n values (each but the body itself follows its own character).
"""

from __future__ import annotations

import numpy as np


def json_values(body: bytes, chunk: int = 1 << 18) -> int:
    """The values of the JSON text ``body`` (see the module docstring), ``chunk`` bytes at a time: the
    numpy passes stay in the CPU's cache, hold a few bytes of arrays per chunk byte and release the GIL."""
    values, inside, run = 1, False, 0  # carried across chunks: within a string; backslashes ending the chunk
    for at in range(0, len(body), chunk):
        part = body[at:at + chunk]
        data = np.frombuffer(part, dtype=np.uint8)
        structural = (data == ord(",")) | (data == ord("[")) | (data == ord("{"))
        quotes = data == ord('"')
        if run or b'\\"' in part:
            _unmark_escaped(data, quotes, run)
        tail = len(part) - len(part.rstrip(b"\\"))
        run = run + tail if tail == len(part) else tail
        at_quotes = np.flatnonzero(quotes)
        # the spans between quotes alternate: the first (before any quote) is inside a string iff `inside`
        spans = np.add.reduceat(structural.view(np.uint8), np.append(0, at_quotes), dtype=np.int64)
        values += int(spans[int(inside)::2].sum())
        inside ^= bool(at_quotes.size % 2)
    return values


def _unmark_escaped(data: np.ndarray, quotes: np.ndarray, run: int) -> None:
    """Clear the quotes that an odd run of backslashes escapes; ``run``: the backslashes that ended the
    previous chunk (a run this chunk's first bytes continue)."""
    backslash = data == ord("\\")
    count = np.cumsum(backslash, dtype=np.int32)  # backslashes up to and including each byte
    at_last_other = np.maximum.accumulate(np.where(backslash, -run, count))  # count at the last other byte
    positions = np.flatnonzero(quotes)
    before = positions - 1
    lengths = np.where(before >= 0, count[before] - at_last_other[before], run)  # the run just before each quote
    quotes[positions[lengths % 2 == 1]] = False

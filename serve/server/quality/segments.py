"""Segments of traffic (tenant, language, tag): names validated, and a bounded set of them tracked.

A segment name is 1 to ``max_length`` characters of ``[A-Za-z0-9._:-]`` starting with a letter or
digit; the length is checked before the pattern, so a hostile value costs at most ``max_length``
characters of matching. A request without a segment is in :data:`DEFAULT_SEGMENT`. At most
``max_segments`` distinct names are tracked (:class:`SegmentRegistry`: metric labels, verdicts,
routes); a name that arrives once the registry is full counts as :data:`OTHER_SEGMENT`, so neither
memory nor the metrics' label sets grow with what clients send.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

DEFAULT_SEGMENT = "default"
OTHER_SEGMENT = "other"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")


def segment_name(value: str | None, max_length: int) -> str:
    """``value`` as a segment name (:data:`DEFAULT_SEGMENT` when None or empty); ValueError naming the
    rule it breaks."""
    if value is None or value == "":
        return DEFAULT_SEGMENT
    if len(value) > max_length:
        raise ValueError(f"segment: at most {max_length} characters, got {len(value)}")
    if not _NAME.fullmatch(value):
        raise ValueError("segment: letters, digits and . _ : - only, starting with a letter or digit")
    return value


class SegmentRegistry:
    """The tracked segments: :data:`DEFAULT_SEGMENT`, the ``known`` ones (the golden set's), then
    live ones first come, first tracked, up to ``max_segments`` in all; :data:`OTHER_SEGMENT` beyond."""

    def __init__(self, max_segments: int, known: Iterable[str] = ()) -> None:
        self.max_segments = max_segments
        self._tracked: dict[str, None] = {}
        for name in (DEFAULT_SEGMENT, *sorted(set(known))):
            self.track(name)

    def track(self, name: str) -> str:
        """``name`` if it is (or now becomes) tracked, else :data:`OTHER_SEGMENT`."""
        if name in self._tracked:
            return name
        if len(self._tracked) < self.max_segments:
            self._tracked[name] = None
            return name
        return OTHER_SEGMENT

    def names(self) -> list[str]:
        return list(self._tracked)

"""The own-corpus guard: the shadow evaluator replays a golden set only against the corpus it judges.

A golden set judges documents by id. Replayed against an index that lacks those ids, every judged
document counts as never retrieved, the golden gauges fall, and ``SteadyrankGoldenRaNWGLow`` fires
for a problem the server does not have. So, at start:

- a user index (``index.path`` or ``index.corpus`` set) with no ``quality.golden``: the evaluator
  stays off (the embedded demo golden set judges only the demo corpus) — :func:`apply_guard`;
- a ``quality.golden`` with the evaluator on: every document id it judges must be in the served
  index, or the server refuses to start, naming the golden set, how many ids are missing and a
  sample — :func:`check_golden_coverage` (``steadyrank serve`` and ``serve --check`` run it once the
  index exists).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from steadyrank.serve.server.default import DEMO_CORPUS, corpus_path
from steadyrank.serve.server.quality.golden_sets import GoldenSet, load_golden
from steadyrank.serve.settings import Settings, SettingsError

logger = logging.getLogger("steadyrank.app")

#: How many missing ids the refusal names.
SAMPLE = 5


class GoldenCoverageError(SettingsError):
    """The golden set judges documents the served index does not hold."""


def user_index(settings: Settings) -> bool:
    """True when the server serves an index of the user's corpus, not the embedded demo one."""
    return corpus_path(settings) != DEMO_CORPUS


def evaluator_off_reason(settings: Settings) -> str | None:
    """Why the guard switches the shadow evaluator off, or None when it leaves it as configured."""
    if settings.quality.enabled and settings.quality.golden is None and user_index(settings):
        return ("the shadow evaluator is off: the index is your own corpus and quality.golden is unset (the "
                "embedded demo golden set judges the demo corpus only); build a golden set on your index with "
                "`steadyrank golden build` and set quality.golden to it")
    return None


def apply_guard(settings: Settings) -> Settings:
    """``settings`` with ``quality.enabled`` false when :func:`evaluator_off_reason` says so (logged)."""
    reason = evaluator_off_reason(settings)
    if reason is None:
        return settings
    logger.warning("%s", reason)
    return settings.model_copy(update={"quality": settings.quality.model_copy(update={"enabled": False})})


def missing_judged_ids(golden: GoldenSet, contains: Callable[[str], bool]) -> tuple[int, list[str]]:
    """``(judged ids, the ids not in the index)``: every document id the golden set judges, in
    first-judged order, tested with ``contains``."""
    judged = list(dict.fromkeys(d for q in golden.queries.values() for d in q.judgments))
    return len(judged), [d for d in judged if not contains(d)]


def coverage_message(golden: str, index: Path, judged: int, missing: list[str]) -> str:
    """The one-line refusal: the golden set, the count of missing ids, a sample, what to do."""
    sample = ", ".join(repr(d) for d in missing[:SAMPLE]) + (", …" if len(missing) > SAMPLE else "")
    return (f"quality.golden: {len(missing)} of the {judged} document ids judged by the golden set {golden} are "
            f"not in the index {index} (e.g. {sample}); the shadow evaluator would score them as never retrieved. "
            f"Build a golden set on this index (steadyrank golden build --index {index}), or set "
            "quality.enabled: false")


def check_golden_coverage(settings: Settings, index: Path) -> None:
    """Refuse (:class:`GoldenCoverageError`) a ``quality.golden`` that judges ids ``index`` lacks.
    No-op when the evaluator is off or replays the embedded demo set on the demo index."""
    quality = settings.quality
    if not quality.enabled or quality.golden is None:
        return
    from steadyrank.retrieval.shards import open_index

    golden = load_golden(quality.golden, split=quality.golden_split, grade_map=quality.grade_map)
    with open_index(index) as store:
        judged, missing = missing_judged_ids(golden, store.__contains__)
    if missing:
        raise GoldenCoverageError(coverage_message(quality.golden, index, judged, missing))

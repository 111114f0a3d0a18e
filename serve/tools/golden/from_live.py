"""Golden-set queries from live judged samples (``steadyrank golden from-live``).

The judgments file of ``quality.live_judging`` (:mod:`serve.server.quality.judgment_store`) holds,
per judged ``/v1/search`` sample, the query and the rubric grades (1–5) of the served documents by
index id. :func:`golden_from_live` turns them into the server's golden format (``{query_id, query,
judgments}``, :mod:`serve.server.quality.golden_sets`), one query per normalised query text: its
judgments are the union of its samples' grades, a later sample's grade of a document replacing an
earlier one; its id is ``live-`` + the first 12 hex digits of the SHA-256 of the normalised text
(stable across runs). Failed samples and ``/v1/rerank`` samples (documents without index ids) are
skipped, and so is a query with fewer than ``min_judged`` judged documents.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from steadyrank.serve.server.quality.golden_sets import normalise_query


def live_query_id(query: str) -> str:
    """``live-`` + 12 hex digits of the SHA-256 of the normalised ``query``."""
    return "live-" + hashlib.sha256(normalise_query(query).encode("utf-8")).hexdigest()[:12]


def golden_from_live(records: Iterable[dict[str, Any]], *, min_judged: int = 1) -> list[dict[str, Any]]:
    """Golden queries (the server's JSONL records) from the judgments file's records, in first-seen order."""
    by_query: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.get("status") != "judged" or record.get("route") != "search":
            continue
        entry = by_query.setdefault(normalise_query(record["query"]), {"query_id": live_query_id(record["query"]),
                                                                        "query": record["query"], "judgments": {}})
        entry["query"] = record["query"]
        entry["judgments"].update({str(d): int(g) for d, g in record["grades"].items()})
    return [q for q in by_query.values() if len(q["judgments"]) >= min_judged]

"""The sweep grid: a YAML file parsed and validated into :class:`Grid`, expanded into configurations.

Paths in the file (models, routing files) are relative to the file's folder; ``bundled`` is the
all-MiniLM-L6-v2 shipped with steadyrank. Every error names the offending key.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from steadyrank.retrieval.hygiene import Hygiene
from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.routing import RoutingSettings, load_settings
from steadyrank.retrieval.store import MODES
from steadyrank.serve.runtime.settings import Precision, Scoring

BUNDLED = "bundled"
FULL = "full"
_PCA = re.compile(r"^PCA(\d+)$")
PRECISIONS = ("fp32", "bf16", "fp16")
SCORINGS = ("hps", "native")
LATENCY_STATS = ("p50_ms", "p95_ms")
TOP_KEYS = {"embedders", "dimensions", "ann", "first_stages", "k_policies", "rerankers", "prices",
            "generator_chunks", "quality", "latency", "bounds", "bootstrap", "hygiene"}


class GridError(ValueError):
    """The grid file is invalid; the message names the key."""


@dataclass(frozen=True)
class Model:
    name: str
    path: str | None  # None = bundled


@dataclass(frozen=True)
class Ann:
    """A FAISS factory string and its search parameters (``ef_search`` for HNSW, ``nprobe`` for IVF)."""

    name: str
    factory: str
    ef_search: int = 128
    nprobe: int = 16


@dataclass(frozen=True)
class KPolicy:
    """``k``: rerank the top k (fixed); or ``routing``: dynamic K between its k_low and k_high."""

    name: str
    k: int | None = None
    routing: RoutingSettings | None = None

    @property
    def depth(self) -> int:
        """Candidates retrieved: k, or the routing's k_high."""
        if self.routing is not None:
            return self.routing.k_high
        assert self.k is not None, "a KPolicy has k or routing (_k_policy makes one or the other)"
        return self.k


#: What an unset regime ``precision``/``scoring`` meant before they were read from the served settings
#: (they still stand for it in :meth:`Config.fingerprint`).
LEGACY_PRECISION: Precision = "fp32"
LEGACY_SCORING: Scoring = "hps"


@dataclass(frozen=True)
class RerankerRegime:
    """A reranker of the grid: ``path`` (None: bundled), ``precision`` (one of PRECISIONS) and
    ``scoring`` (one of SCORINGS), each written over the served reranker section; None: as served."""

    name: str
    path: str | None
    precision: Precision | None = None
    scoring: Scoring | None = None

    def legacy_json(self) -> dict[str, Any]:
        """The regime as a grid written before unset fields meant "as served" hashed it (unset: fp32, hps)."""
        return {"name": self.name, "path": self.path, "precision": self.precision or LEGACY_PRECISION,
                "scoring": self.scoring or LEGACY_SCORING}


@dataclass(frozen=True)
class HygieneStages:
    """An entry of the ``hygiene`` axis: the optional pipeline stages (:mod:`retrieval.hygiene`)
    ``dedup_threshold`` (null: off) and ``boost_weight`` (0: off) under a name."""

    name: str
    stages: Hygiene = Hygiene()


@dataclass(frozen=True)
class Prices:
    """Cost-model inputs, in one currency: per 1,000 tokens reranked / sent to the generator, per GiB
    of index per month and per build hour, amortised over ``queries_per_month``."""

    rerank_per_1k_tokens: float = 0.0
    generator_per_1k_tokens: float = 0.0
    index_per_gib_month: float = 0.0
    build_per_hour: float = 0.0
    queries_per_month: float = 1_000_000.0


@dataclass(frozen=True)
class Grid:
    embedders: tuple[Model, ...]
    dimensions: tuple[str, ...]
    ann: tuple[Ann, ...]
    first_stages: tuple[Mode, ...]
    k_policies: tuple[KPolicy, ...]
    rerankers: tuple[RerankerRegime, ...]
    prices: Prices = Prices()
    generator_chunks: int = 10
    quality: str = "ra_nwg@30"
    latency_stat: str = "p95_ms"
    latency_queries: int = 8
    sla_ms: tuple[float, ...] = ()
    budgets: tuple[float, ...] = ()
    quality_targets: tuple[float, ...] = ()
    bootstrap_resamples: int = 2000
    confidence: float = 0.95
    hygiene: tuple[HygieneStages | None, ...] = (None,)


@dataclass(frozen=True)
class Config:
    """One point of the grid. ``dimension``/``ann`` are ``-`` for the bm25 first stage (no dense index).
    ``hygiene``: None when the grid has no ``hygiene`` axis (the id and fingerprint are then those of
    a grid written before the axis existed); otherwise its name is the id's last part."""

    embedder: Model
    dimension: str
    ann: Ann | None
    first_stage: Mode
    k_policy: KPolicy
    reranker: RerankerRegime
    hygiene: HygieneStages | None = None
    config_id: str = field(init=False)

    def __post_init__(self) -> None:
        ann = "-" if self.ann is None else self.ann.name
        parts = [self.embedder.name, self.dimension, ann, self.first_stage, self.k_policy.name, self.reranker.name]
        object.__setattr__(self, "config_id", "/".join(parts + ([] if self.hygiene is None else [self.hygiene.name])))

    @property
    def stages(self) -> Hygiene:
        """The hygiene stages this configuration runs (none without the axis)."""
        return Hygiene() if self.hygiene is None else self.hygiene.stages

    @property
    def factory(self) -> str | None:
        """The FAISS factory string with the dimension's pre-transform (``PCA128,HNSW32,Flat``)."""
        if self.ann is None:
            return None
        return self.ann.factory if self.dimension == FULL else f"{self.dimension},{self.ann.factory}"

    def fingerprint(self) -> str:
        """Hash of the configuration as the grid writes it (resume reuses a match only). An unset
        reranker precision or scoring hashes as fp32/hps, as before they meant "as served": the sweep
        adds the served models to its resume key where they differ from that (:func:`sweep.fingerprint`)."""
        fields = asdict(self) | {"reranker": self.reranker.legacy_json()}
        if self.hygiene is None:  # as before the axis existed: earlier results stay reusable
            del fields["hygiene"]
        payload = json.dumps(fields, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _need(data: dict[str, Any], key: str, kind: type) -> Any:
    if key not in data:
        raise GridError(f"missing key {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (kind is list and not value):
        raise GridError(f"{key!r} must be a non-empty {kind.__name__}")
    return value


def _entries(data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = _need(data, key, list)
    names = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise GridError(f"{key}[{i}] must be a mapping with a non-empty 'name'")
        if "/" in item["name"] or item["name"] in names:
            raise GridError(f"{key}[{i}]: name {item['name']!r} is duplicated or contains '/'")
        names.add(item["name"])
    return items


def _model_path(value: Any, where: str, base: Path) -> str | None:
    if not isinstance(value, str) or not value:
        raise GridError(f"{where}: 'path' must be a model directory or {BUNDLED!r}")
    if value == BUNDLED:
        return None
    path = (base / value).resolve()
    if not path.is_dir():
        raise GridError(f"{where}: model directory {path} does not exist")
    return str(path)


def _only(item: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(item) - allowed)
    if unknown:
        raise GridError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GridError(f"{where} must be an integer ≥ 1, got {value!r}")
    return value


def _k_policy(item: dict[str, Any], where: str, base: Path) -> KPolicy:
    _only(item, {"name", "k", "routing"}, where)
    if ("k" in item) == ("routing" in item):
        raise GridError(f"{where}: give exactly one of 'k' (fixed) or 'routing' (dynamic)")
    if "k" in item:
        return KPolicy(item["name"], k=_positive_int(item["k"], f"{where}.k"))
    routing = item["routing"]
    try:
        if isinstance(routing, str):
            settings = load_settings(base / routing)
        elif isinstance(routing, dict):
            settings = RoutingSettings.from_json(routing)
        else:
            raise GridError(f"{where}.routing must be a settings file path or a mapping")
    except (OSError, ValueError, TypeError) as exc:
        if isinstance(exc, GridError):
            raise
        raise GridError(f"{where}.routing: {exc}") from None
    return KPolicy(item["name"], routing=settings)


def parse_grid(data: Any, base: Path) -> Grid:
    """Validate a loaded YAML document (docs/guides/clq.md) into a :class:`Grid`."""
    if not isinstance(data, dict):
        raise GridError("the grid must be a YAML mapping")
    _only(data, TOP_KEYS, "grid")
    embedders = tuple(
        Model(e["name"], _model_path(e.get("path"), f"embedders[{i}]", base))
        for i, e in enumerate(_entries(data, "embedders")) if not _only(e, {"name", "path"}, f"embedders[{i}]")
    )
    dimensions = tuple(_need(data, "dimensions", list))
    for i, d in enumerate(dimensions):
        if d != FULL and not (isinstance(d, str) and _PCA.match(d)):
            raise GridError(f"dimensions[{i}]: {d!r} is not {FULL!r} or 'PCA<d>' (a FAISS PCA pre-transform)")
    if len(set(dimensions)) != len(dimensions):
        raise GridError("dimensions: duplicated entry")
    anns = []
    for i, a in enumerate(_entries(data, "ann")):
        _only(a, {"name", "factory", "ef_search", "nprobe"}, f"ann[{i}]")
        if not isinstance(a.get("factory"), str) or not a["factory"] or a["factory"].startswith("PCA"):
            raise GridError(f"ann[{i}]: 'factory' must be a FAISS factory string without a PCA prefix (use dimensions)")
        params = {k: _positive_int(a[k], f"ann[{i}].{k}") for k in ("ef_search", "nprobe") if k in a}
        anns.append(Ann(a["name"], a["factory"], **params))
    stages = tuple(_need(data, "first_stages", list))
    for i, s in enumerate(stages):
        if s not in MODES:
            raise GridError(f"first_stages[{i}]: {s!r} is not one of {', '.join(MODES)}")
    policies = tuple(_k_policy(p, f"k_policies[{i}]", base) for i, p in enumerate(_entries(data, "k_policies")))
    rerankers = []
    for i, r in enumerate(_entries(data, "rerankers")):
        where = f"rerankers[{i}]"
        _only(r, {"name", "path", "precision", "scoring"}, where)
        if r.get("precision") not in (None, *PRECISIONS):
            raise GridError(f"{where}.precision must be one of {', '.join(PRECISIONS)} (unset: as served)")
        if r.get("scoring") not in (None, *SCORINGS):
            raise GridError(f"{where}.scoring must be one of {', '.join(SCORINGS)} (unset: as served)")
        rerankers.append(RerankerRegime(r["name"], _model_path(r.get("path"), where, base),
                                        r.get("precision"), r.get("scoring")))
    prices_in = data.get("prices", {}) or {}
    if not isinstance(prices_in, dict):
        raise GridError("'prices' must be a mapping")
    _only(prices_in, set(Prices.__dataclass_fields__), "prices")
    for key, value in prices_in.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise GridError(f"prices.{key} must be a number ≥ 0, got {value!r}")
    if prices_in.get("queries_per_month", 1) <= 0:
        raise GridError("prices.queries_per_month must be > 0")
    latency = data.get("latency", {}) or {}
    _only(latency, {"stat", "queries"}, "latency")
    if latency.get("stat", "p95_ms") not in LATENCY_STATS:
        raise GridError(f"latency.stat must be one of {', '.join(LATENCY_STATS)}")
    bounds = data.get("bounds", {}) or {}
    _only(bounds, {"sla_ms", "budget", "quality_target"}, "bounds")
    for key in ("sla_ms", "budget", "quality_target"):
        values = bounds.get(key, [])
        if not isinstance(values, list) or any(isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 for v in values):
            raise GridError(f"bounds.{key} must be a list of numbers ≥ 0")
    boot = data.get("bootstrap", {}) or {}
    _only(boot, {"resamples", "confidence"}, "bootstrap")
    confidence = boot.get("confidence", 0.95)
    if not isinstance(confidence, float) or not 0 < confidence < 1:
        raise GridError("bootstrap.confidence must be in (0, 1)")
    hygiene = tuple(_hygiene(h, f"hygiene[{i}]") for i, h in enumerate(_entries(data, "hygiene"))) \
        if "hygiene" in data else (None,)
    quality = data.get("quality", "ra_nwg@30")
    from steadyrank.metrics.measures import parse_measures

    try:
        parse_measures([quality])
    except ValueError as exc:
        raise GridError(f"quality: {exc}") from None
    return Grid(
        embedders=embedders, dimensions=dimensions, ann=tuple(anns), first_stages=stages, k_policies=policies,
        rerankers=tuple(rerankers), prices=Prices(**{k: float(v) for k, v in prices_in.items()}),
        generator_chunks=_positive_int(data.get("generator_chunks", 10), "generator_chunks"),
        quality=quality, latency_stat=latency.get("stat", "p95_ms"),
        latency_queries=_positive_int(latency.get("queries", 8), "latency.queries"),
        sla_ms=tuple(float(v) for v in bounds.get("sla_ms", [])),
        budgets=tuple(float(v) for v in bounds.get("budget", [])),
        quality_targets=tuple(float(v) for v in bounds.get("quality_target", [])),
        bootstrap_resamples=_positive_int(boot.get("resamples", 2000), "bootstrap.resamples"),
        confidence=confidence, hygiene=hygiene,
    )


def _hygiene(item: dict[str, Any], where: str) -> HygieneStages:
    _only(item, {"name", "dedup_threshold", "boost_weight"}, where)
    threshold, weight = item.get("dedup_threshold"), item.get("boost_weight", 0.0)
    for key, value in (("dedup_threshold", threshold), ("boost_weight", weight)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise GridError(f"{where}.{key} must be a number, got {value!r}")
    try:
        stages = Hygiene(None if threshold is None else float(threshold), float(weight))
    except ValueError as exc:
        raise GridError(f"{where}: {exc}") from None
    return HygieneStages(item["name"], stages)


def load_grid(path: str | Path) -> Grid:
    """Read and validate a grid YAML file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise GridError(f"{path}: not valid YAML: {exc}") from None
    return parse_grid(data, path.resolve().parent)


def expand(grid: Grid) -> list[Config]:
    """Every configuration: dense/hybrid × embedder × dimension × ANN, bm25 once per embedder; × K × reranker
    × hygiene."""
    retrieval: list[tuple[Model, str, Ann | None, Mode]] = []
    for embedder in grid.embedders:
        for stage in grid.first_stages:
            if stage == "bm25":
                retrieval.append((embedder, "-", None, stage))
            else:
                retrieval.extend((embedder, d, a, stage) for d in grid.dimensions for a in grid.ann)
    return [Config(e, d, a, s, k, r, h) for e, d, a, s in retrieval for k in grid.k_policies for r in grid.rerankers
            for h in grid.hygiene]

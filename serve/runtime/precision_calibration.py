"""``precision: auto`` by measurement: the fastest forward precision whose ranking agrees with FP32.

Without a calibration, ``auto`` follows the hardware's flags (:func:`serve.runtime.precision.choose`):
BF16 where the CPU or GPU has a BF16 unit. That guess is wrong where another precision is faster on
the model at hand (int8 on a CPU with VNNI or AMX-INT8 ran 1.33× BF16's rate on one of our CPUs), so
the server and the CLI calibrate instead:

1. The candidates (:func:`candidates`): FP32 (the reference) and every other precision the device
   computes natively — on a CPU BF16 with AMX-BF16/AVX512-BF16 and int8 with AMX-INT8/VNNI (the
   transformers backend only); on CUDA BF16 where the GPU has it, and FP16.
2. Each candidate loads the model and ranks the calibration set (:data:`CALIBRATION_QUERIES`
   queries of the bundled demo set, each with its judged passages and
   :data:`CALIBRATION_DISTRACTORS` passages of other topics): once to warm up, then
   :data:`CALIBRATION_REPEATS` timed passes, whose median is its time.
3. Parity: for each query, Spearman's ρ (average ranks for ties) between the candidate's rank keys
   and FP32's over that query's passages; the candidate's agreement is the mean over queries.
4. The choice (:func:`pick`): the fastest candidate whose agreement is at least
   :data:`PARITY_MIN_SPEARMAN`; FP32 always qualifies, so a precision that is slower than FP32 or
   breaks parity is never picked.

Each measured precision below FP32 also gets a score error bound (:class:`ErrorBound`, what certified
cutoffs re-score by: :mod:`retrieval.ranking`): the largest |key − FP32 key| over the calibration
pairs of the even-numbered queries (the fit half), and the share of the odd-numbered queries' pairs
(the held-out half) within it (its coverage).

The choice is cached per model, device, CPU and torch (:class:`CalibrationCache`, a JSON file
beside the server's index cache), so a restart loads only the winner. Models whose weights are
smaller than :data:`MEASURE_MIN_WEIGHT_BYTES` are not measured (their forward is dominated by
per-call overhead, so a timing says nothing about the precision): the flags decide, as before.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from importlib.metadata import version
from pathlib import Path

import numpy as np
from scipy.stats import rankdata

from steadyrank.retrieval.fsio import atomic_write_bytes
from steadyrank.serve.runtime.precision import (
    ForwardPrecision,
    PrecisionChoice,
    choose_for,
    cpu_bf16_unit,
    cpu_int8_unit,
    device_facts,
)
from steadyrank.serve.runtime.settings import ModelSettings

#: the cache file's name in the server's cache directory (``cache_dir``)
CACHE_FILE = "precision-auto.json"
#: the least mean Spearman ρ against FP32's keys a measured precision must reach to be picked
PARITY_MIN_SPEARMAN = 0.99
#: timed passes over the calibration set per candidate (after one warm-up pass); their median counts
CALIBRATION_REPEATS = 2
#: demo queries in the calibration set, and passages of other topics added to each query's judged ones
#: (~56 pairs of ~50 words: ~0.15 s of a MiniLM cross-encoder's FP32 forward on 2 cores)
CALIBRATION_QUERIES = 4
CALIBRATION_DISTRACTORS = 5
#: seconds a calibration may spend: once spent, the candidates not yet measured are not measured
#: (nor picked); FP32, measured first, always is
CALIBRATION_BUDGET_S = 120.0
#: models with less weight data on disk than this are not measured (the flags decide)
MEASURE_MIN_WEIGHT_BYTES = 8 * 2**20
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")

#: ranks the calibration set once: the rank keys of each query's passages, float (n_q,) arrays
RankPass = Callable[[], list[np.ndarray]]


@dataclass(frozen=True)
class ErrorBound:
    """A low-precision forward's score error on the calibration set, in rank-key units.

    ``bound`` ε = max |key − key_FP32| over the fit half's pairs (the even-numbered calibration
    queries); ``coverage`` = the share of the check half's pairs (odd-numbered queries) with
    |key − key_FP32| ≤ ε; ``fit_pairs``, ``check_pairs``: the pairs of each half."""

    bound: float
    coverage: float
    fit_pairs: int
    check_pairs: int


def error_bound(keys: Sequence[np.ndarray], reference: Sequence[np.ndarray]) -> ErrorBound:
    """:class:`ErrorBound` of ``keys`` against the FP32 ``reference`` (per query, same order); needs
    at least two queries (one per half)."""
    if len(keys) < 2 or len(keys) != len(reference):
        raise ValueError("an error bound needs two or more queries, with FP32 keys for each")
    errors = [np.abs(np.asarray(k, np.float64) - np.asarray(r, np.float64)) for k, r in zip(keys, reference, strict=True)]
    fit, check = np.concatenate(errors[0::2]), np.concatenate(errors[1::2])
    bound = float(fit.max())
    return ErrorBound(bound, float(np.mean(check <= bound)), int(fit.size), int(check.size))


@dataclass(frozen=True)
class Measurement:
    """One candidate: ``seconds``, the median time of one pass over the calibration set; ``spearman``,
    the mean over queries of Spearman's ρ between its keys and FP32's (1.0 for FP32 itself);
    ``error``: its :class:`ErrorBound` (None for FP32)."""

    precision: ForwardPrecision
    seconds: float
    spearman: float
    error: ErrorBound | None = None


@dataclass(frozen=True)
class CalibrationQuery:
    """One calibration query and its passages (judged ones first, then distractors)."""

    query: str
    passages: tuple[str, ...]


def candidates(device_type: str, flags: frozenset[str], *, backend: str = "transformers",
               cuda_bf16: bool = False) -> tuple[ForwardPrecision, ...]:
    """The precisions worth measuring on ``device_type`` (``cpu`` | ``cuda``), FP32 first."""
    found: list[ForwardPrecision] = ["fp32"]
    if device_type == "cuda":
        if cuda_bf16:
            found.append("bf16")
        found.append("fp16")
        return tuple(found)
    if cpu_bf16_unit(flags) is not None:
        found.append("bf16")
    if cpu_int8_unit(flags) is not None and backend == "transformers":
        found.append("int8")
    return tuple(found)


def mean_spearman(keys: Sequence[np.ndarray], reference: Sequence[np.ndarray]) -> float:
    """The mean over queries of Spearman's ρ between ``keys`` and ``reference`` (average ranks for
    ties). A query whose two key lists are both constant agrees (1.0); one constant against a
    varied reference does not (0.0)."""
    values = []
    for ours, theirs in zip(keys, reference, strict=True):
        flat_ours, flat_theirs = np.ptp(ours) == 0, np.ptp(theirs) == 0
        if flat_ours or flat_theirs:
            values.append(1.0 if flat_ours and flat_theirs else 0.0)
        else:
            values.append(float(np.corrcoef(rankdata(ours), rankdata(theirs))[0, 1]))  # ρ: Pearson of the ranks
    return float(np.mean(values))


def measure(precisions: Sequence[ForwardPrecision], load_pass: Callable[[ForwardPrecision], RankPass],
            repeats: int = CALIBRATION_REPEATS, budget_s: float = CALIBRATION_BUDGET_S,
            clock: Callable[[], float] = time.perf_counter) -> list[Measurement]:
    """Load each precision's pass in turn (``load_pass``; only one model held at a time; FP32 first),
    time it (one warm-up pass, then the median of ``repeats``) and compare its keys with FP32's.
    Once ``budget_s`` seconds are spent, the precisions left are not measured (not returned).
    ``clock``: seconds, monotonic."""
    if "fp32" not in precisions:
        raise ValueError("a calibration needs the FP32 reference among its candidates")
    deadline = clock() + budget_s
    timed: dict[ForwardPrecision, tuple[float, list[np.ndarray]]] = {}
    for precision in sorted(precisions, key=lambda p: p != "fp32"):
        if timed and clock() > deadline:
            break
        run = load_pass(precision)
        keys = run()  # warm-up: first-call allocations, lazy kernels, int8 packing
        seconds = []
        for _ in range(repeats):
            started = clock()
            run()
            seconds.append(clock() - started)
        timed[precision] = (statistics.median(seconds), keys)
        del run  # this candidate's model, before the next one loads
    reference = timed["fp32"][1]
    return [Measurement(p, seconds, 1.0, None) if p == "fp32"
            else Measurement(p, seconds, mean_spearman(keys, reference), error_bound(keys, reference))
            for p, (seconds, keys) in timed.items()]


def pick(measurements: Sequence[Measurement], min_spearman: float = PARITY_MIN_SPEARMAN,
         unmeasured: Sequence[str] = ()) -> PrecisionChoice:
    """The fastest measurement whose agreement is ≥ ``min_spearman`` (FP32 always qualifies); the
    reason names each candidate's time and, for the refused, why (``unmeasured``: candidates the
    calibration's budget left out)."""
    by_precision = {m.precision: m for m in measurements}
    reference = by_precision.get("fp32")
    if reference is None:
        raise ValueError("a calibration needs the FP32 reference among its measurements")
    eligible = [m for m in measurements if m.precision == "fp32" or m.spearman >= min_spearman]
    best = min(eligible, key=lambda m: m.seconds)
    parts = []
    for m in measurements:
        ms = f"{m.precision} {m.seconds * 1000:.0f} ms"
        if m.precision != "fp32":
            ms += f", ρ {m.spearman:.4f}" + ("" if m in eligible else f" < {min_spearman} (breaks parity)")
        parts.append(ms)
    parts += [f"{p} not measured (calibration budget spent)" for p in unmeasured]
    speedup = reference.seconds / best.seconds if best.seconds > 0 else float("inf")
    return PrecisionChoice("auto", best.precision, f"measured: {'; '.join(parts)}; {best.precision} "
                                                   f"{speedup:.2f}× FP32's rate")


def calibration_set(n_queries: int = CALIBRATION_QUERIES,
                    distractors: int = CALIBRATION_DISTRACTORS) -> list[CalibrationQuery]:
    """The bundled demo set's first ``n_queries`` golden queries, each with its judged passages and
    ``distractors`` passages of other topics (every 37th passage from the query's index on, skipping
    judged ones): deterministic, no download."""
    demo = resources.files("steadyrank.serve") / "data" / "demo"
    corpus = [json.loads(line) for line in (demo / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    texts = {doc["_id"]: doc["text"] for doc in corpus}
    golden = [json.loads(line) for line in (demo / "golden.jsonl").read_text(encoding="utf-8").splitlines() if line]
    out = []
    for i, entry in enumerate(golden[:n_queries]):
        judged = list(entry["judgments"])
        others = [corpus[(i + 37 * j) % len(corpus)]["_id"] for j in range(1, len(corpus))]
        extra = [d for d in others if d not in entry["judgments"]][:distractors]
        out.append(CalibrationQuery(entry["query"], tuple(texts[d] for d in judged + extra)))
    return out


def weight_bytes(model_dir: Path) -> int:
    """Bytes of weight files (``*.safetensors``, ``*.bin``, ``*.pt``) directly in ``model_dir``."""
    return sum(p.stat().st_size for p in model_dir.iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)


def cpu_model_name() -> str:
    """The ``model name`` line of ``/proc/cpuinfo`` ("" where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    return next((line.partition(":")[2].strip() for line in text.splitlines() if line.startswith("model name")), "")


def calibration_key(model_dir: Path, *, model_id: str, device: str, flags: frozenset[str], torch_version: str,
                    shape: str) -> str:
    """What a cached choice is valid for: the model (id, and the size and modification time of each
    weight file), the device, the CPU (model name and flags), torch and the forward's shape settings."""
    weights = sorted((p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in model_dir.iterdir()
                     if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    identity = json.dumps([model_id, weights, device, cpu_model_name(), sorted(flags), torch_version, shape])
    return hashlib.sha256(identity.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Calibration:
    """What a measured ``auto`` of one model on this machine is about: the candidates and the cache key."""

    options: tuple[ForwardPrecision, ...]
    key: str


def calibration_for(model_dir: Path, identity: str, settings: ModelSettings) -> Calibration | None:
    """The calibration ``settings`` (``precision: auto``) of the model in ``model_dir`` get on this
    machine, or None where none is measured: one candidate only, or weights under
    :data:`MEASURE_MIN_WEIGHT_BYTES`. Torch-free (the server's driver asks it for the start line)."""
    facts = device_facts(settings.device)
    options = candidates(facts.device_type, facts.flags, backend=settings.backend, cuda_bf16=facts.cuda_bf16)
    if len(options) == 1 or weight_bytes(model_dir) < MEASURE_MIN_WEIGHT_BYTES:
        return None
    shape = f"{settings.backend}|{settings.max_length}|{settings.batch_size}|{settings.scoring}"
    key = calibration_key(model_dir, model_id=identity, device=facts.device_type, flags=facts.flags,
                          torch_version=version("torch"), shape=shape)
    return Calibration(options, key)


class CalibrationCache:
    """Calibrated choices in one JSON file: ``{key: {"model", "precision", "reason", "measurements"}}``
    (written whole and atomically; an unreadable file counts as empty and is rewritten)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> PrecisionChoice | None:
        entry = self._read().get(key)
        if not isinstance(entry, dict) or entry.get("precision") not in ("fp32", "bf16", "fp16", "int8"):
            return None
        return PrecisionChoice("auto", entry["precision"], f"{entry.get('reason', '')} (cached)")

    def error_bound(self, key: str, precision: str) -> ErrorBound | None:
        """The cached :class:`ErrorBound` of ``precision`` under ``key`` (None: none cached)."""
        entry = self._read().get(key)
        found = entry.get("measurements") if isinstance(entry, dict) else None
        for m in found if isinstance(found, list) else []:
            error = m.get("error") if isinstance(m, dict) else None
            if m.get("precision") == precision and isinstance(error, dict):
                try:
                    return ErrorBound(**error)
                except TypeError:  # an entry of another layout: measured again
                    return None
        return None

    def put(self, key: str, model_id: str, choice: PrecisionChoice, measurements: Sequence[Measurement]) -> None:
        data = self._read()
        data[key] = {"model": model_id, "precision": choice.precision, "reason": choice.reason,
                     "measurements": [asdict(m) for m in measurements]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, json.dumps(data, indent=1, sort_keys=True).encode())


def expected_choice(model_dir: Path, identity: str, settings: ModelSettings, cache_file: Path) -> PrecisionChoice | None:
    """What a scorer of ``settings`` loaded with ``cache_file`` will run in, as known before it loads
    (torch-free): the cached measured choice; None where a calibration is still to run; for a model
    that is not measured, :func:`serve.runtime.precision.choose_for`'s choice."""
    calibration = calibration_for(model_dir, identity, settings) if settings.precision == "auto" else None
    if calibration is None:
        return choose_for(settings.precision, settings.device, settings.backend)
    return CalibrationCache(cache_file).get(calibration.key)

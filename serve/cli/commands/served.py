"""The served settings an offline command runs under (``steadyrank search``, ``steadyrank route calibrate``).

One resolution, so that an offline run ranks as ``POST /v1/search`` does on a server started with
the same settings: ``--config`` (a ``steadyrank serve`` settings file; without it
``$STEADYRANK_SETTINGS``, else the embedded default, as ``steadyrank serve`` reads them) gives every
default, and a flag the user gives wins over its one field:

- the models: ``embedder`` and the primary reranker (``reranker``, the embedder's section when
  unset) as :class:`~serve.runtime.settings.ModelSettings`, precision included (``auto`` is
  resolved where the model loads, as in a replica), Hub ids made local folders as the server does;
- stored vectors or re-encoding: :meth:`ModelSettings.same_vectors` of those two sections, the
  Searcher's test, on the settings as written (not as resolved: a split layout resolves ``auto``
  on the model's node, not the Searcher's);
- the routing policy (``routing``: file, fields, ``disable``) for the run's ``top_n``
  (:meth:`RoutingSettings.for_top_n`, what the Searcher runs for a request's ``top_n``) and the route;
- ``search``: ``default_mode``, ``rrf_k``, ``rrf_weights``, ``denoise`` and its chat endpoint,
  ``dedup_threshold`` and ``boost_weight`` (the optional hygiene stages);
- the index: ``index`` (the server's index directory, built first as the server would);
- the compute plan (:func:`served_compute`): the model calls run on one compute thread with the
  torch threads and forward lanes a colocated replica sets, since an FP32 sum's rounding depends on
  how many threads split it.

:meth:`ServedRun.to_json` names every setting in force; the commands print it and write it into
their reports.
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from steadyrank.retrieval.hygiene import Hygiene
from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.rewrite import DenoiseMode, LlmSettings
from steadyrank.retrieval.routing import Route, RoutingSettings
from steadyrank.retrieval.routing import load_settings as load_routing_file
from steadyrank.serve.cli.commands.index import BUNDLED
from steadyrank.serve.runtime.precision import precision_on_this_machine
from steadyrank.serve.runtime.resolution import UNSET, overlay, scoring_json
from steadyrank.serve.runtime.settings import ModelSettings
from steadyrank.serve.settings import ENV_SETTINGS, Settings, load_settings

#: What ``ServedRun.source`` says when no settings file was read.
EMBEDDED_DEFAULT = "(embedded default)"


@dataclass(frozen=True)
class ServedRun:
    """Every setting an offline search runs under, resolved once from the served settings and the flags.

    ``reranker`` None: no reranking (``--no-rerank``; the retrieval order is written), which no
    server does. ``index``: the index folder to open (None: the served one, see :func:`served_index`)."""

    source: str
    settings: Settings
    embedder: ModelSettings
    reranker: ModelSettings | None
    stored_vectors: bool
    policy: RoutingSettings
    route: Route
    mode: Mode
    rrf_k: float
    rrf_weights: tuple[float, float]
    denoise: DenoiseMode
    denoise_llm: LlmSettings | None
    index: str | None
    hygiene: Hygiene = Hygiene()

    @property
    def calibration(self) -> Path:
        """The served precision calibrations (a cross-encoder's measured ``auto``, cached by the server
        in its cache directory): the reranker loads in the precision the server measured."""
        from steadyrank.serve.runtime.precision_calibration import CACHE_FILE

        return self.settings.cache_path() / CACHE_FILE

    def to_json(self) -> dict[str, Any]:
        """The settings in force (``settings`` in ``RUN.json`` and ``--json``)."""

        return {"source": self.source, "embedder": scoring_json(self.embedder),
                "reranker": None if self.reranker is None else scoring_json(self.reranker),
                "stored_vectors": self.stored_vectors if self.reranker is not None else None,
                "mode": self.mode, "route": self.route if self.reranker is not None else None,
                "routing": self.policy.to_json(), "rrf_k": self.rrf_k, "rrf_weights": list(self.rrf_weights),
                "denoise": self.denoise, **self.hygiene.to_json()}

    def describe(self) -> str:
        """One line naming the settings in force (printed on stderr before the run)."""
        reranker = "none" if self.reranker is None else (
            f"{_precision(self.reranker)}"
            + (", scored from the index's stored vectors" if self.stored_vectors else ", documents re-encoded"))
        p = self.policy
        return (f"settings {self.source}: embedder {_precision(self.embedder)}; reranker {reranker}; "
                f"mode {self.mode}, rrf_k {self.rrf_k:g}, weights {self.rrf_weights[0]:g},{self.rrf_weights[1]:g}; "
                f"route {self.route}, k_low {p.k_low}, k_high {p.k_high}, top_n {p.top_n}; denoise {self.denoise}; "
                f"dedup {_off(self.hygiene.dedup_threshold)}, boost {self.hygiene.boost_weight:g}")


def _off(value: float | None) -> str:
    return "off" if value is None else f"{value:g}"


def _name(model: ModelSettings) -> str:
    return BUNDLED if model.path is None else model.path


def _precision(model: ModelSettings) -> str:
    """``NAME PRECISION``, with what ``auto`` runs in here: ``bundled auto (bf16 here)``."""
    here = precision_on_this_machine(model)
    return f"{_name(model)} {model.precision}" + (f" ({here} here)" if here != model.precision else "")


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    """``--config``: the served settings every other default comes from."""
    parser.add_argument("--config", metavar="FILE", default=None,
                        help=f"the settings file of the server to reproduce ('steadyrank serve --config'): every "
                             f"setting a flag does not name comes from it (models and precision, stored vectors or "
                             f"re-encoding, routing, mode, RRF, denoise, index), so the run ranks as /v1/search "
                             f"does (default ${ENV_SETTINGS}, else the embedded default)")


def _model(section: ModelSettings, path: str | None, precision: str | None,
           prompts: dict[str, str] | None = None) -> ModelSettings:
    """``section`` with the flags' model ``path`` (``bundled`` = the bundled MiniLM; its Hub
    ``revision`` and ``served_id`` belonged to the model it replaces), ``precision`` and ``prompts`` over it."""
    given = UNSET if path is None else None if path == BUNDLED else path
    return overlay(section, path=given, precision=precision, prompts=prompts)


def served_run(args: argparse.Namespace) -> ServedRun:
    """The :class:`ServedRun` of a command's parsed flags (module docstring). Reads ``config``,
    ``index``, ``embedder``, ``embedder_precision``, ``rerank``, ``no_rerank``, ``rerank_precision``,
    ``route_settings``, ``depth``, ``k_low``, ``top_n``, ``route``, ``mode``, ``rrf_k``,
    ``rrf_weights``, ``denoise``, ``denoise_llm_url``, ``denoise_llm_model``, ``dedup_threshold`` and
    ``boost_weight`` (absent or None = served; ``--no-dedup``: ``dedup_threshold`` is ``off``)."""
    from steadyrank.serve.server.model_refs import resolve_model_refs

    def flag(name: str) -> Any:
        return getattr(args, name, None)

    source = flag("config") or os.environ.get(ENV_SETTINGS) or None
    settings = resolve_model_refs(load_settings(source))
    embedder = _model(settings.embedder, flag("embedder"), flag("embedder_precision"), flag("embedder_prompts"))
    reranker = None if flag("no_rerank") else _model(settings.reranker_model, flag("rerank"), flag("rerank_precision"))
    policy = load_routing_file(flag("route_settings")) if flag("route_settings") else settings.routing_policy()
    if flag("depth") is not None:
        policy = replace(policy, k_high=flag("depth"), k_low=min(policy.k_low, flag("depth")))
    policy = policy.for_top_n(flag("top_n") or policy.top_n)
    if flag("k_low") is not None:  # asked for by name: kept as given
        policy = replace(policy, k_low=flag("k_low"))
    search = settings.search
    denoise: DenoiseMode = flag("denoise") or search.denoise
    llm = search.denoise_llm.rewriter_settings() if search.denoise_llm is not None else None
    if flag("denoise_llm_url") or flag("denoise_llm_model"):
        if not (flag("denoise_llm_url") and flag("denoise_llm_model")):
            raise ValueError("--denoise-llm-url and --denoise-llm-model go together")
        llm = LlmSettings(base_url=flag("denoise_llm_url"), model=flag("denoise_llm_model"))
    if denoise == "llm" and llm is None:
        raise ValueError("--denoise llm needs --denoise-llm-url and --denoise-llm-model (or search.denoise_llm "
                         "in the settings)")
    return ServedRun(
        source=str(source) if source else EMBEDDED_DEFAULT, settings=settings, embedder=embedder, reranker=reranker,
        stored_vectors=reranker is not None and reranker.same_vectors(embedder), policy=policy,
        route=flag("route") or settings.routing.route, mode=flag("mode") or search.default_mode,
        rrf_k=search.rrf_k if flag("rrf_k") is None else flag("rrf_k"),
        rrf_weights=flag("rrf_weights") or search.rrf_weights, denoise=denoise, denoise_llm=llm, index=flag("index"),
        hygiene=_hygiene(search.hygiene(), flag("dedup_threshold"), flag("boost_weight")))


def _hygiene(served: Hygiene, dedup_threshold: float | str | None, boost_weight: float | None) -> Hygiene:
    """The served hygiene stages with the flags that were given: ``dedup_threshold`` a cosine or
    ``"off"``, ``boost_weight`` a weight (0 = off)."""
    threshold = served.dedup_threshold if dedup_threshold is None else (
        None if dedup_threshold == "off" else float(dedup_threshold))
    return Hygiene(threshold, served.boost_weight if boost_weight is None else boost_weight)


def served_index(run: ServedRun) -> Path:
    """The index folder of ``run``: ``--index``, else the server's (``index.path``, or the cache
    folder of ``index.corpus`` / the demo corpus, built first when it holds no index yet, as
    ``steadyrank serve`` does on its first start)."""
    if run.index is not None:
        return Path(run.index)
    from steadyrank.serve.server.default import ensure_index

    return ensure_index(run.settings)


def served_compute(run: ServedRun) -> ThreadPoolExecutor:
    """The thread an offline run makes its model calls on, set up as a model replica sets its own
    (:func:`serve.server.components.common.set_compute_threads`, then
    :func:`~serve.server.components.common.model_executor`): the torch threads and forward lanes of the
    model deployment a colocated replica builds last (the canary reranker's, else the reranker's:
    the process keeps one setting); a call of one forward batch on the compute thread with every
    lane's threads, a call of several on the lanes. A forward's FP32 sums round by how many threads
    split them, so scores are bitwise the served ones where the thread counts are: set
    ``deployments.<model>.torch_threads`` (unset, it is torch's count in this process, and Ray's
    default in a replica)."""
    from steadyrank.serve.server.components.common import model_executor, set_compute_threads

    d = run.settings.deployments
    last = d.canary_reranker if run.settings.canary is not None else d.reranker
    set_compute_threads(last.torch_threads, last.forward_lanes)
    return model_executor()

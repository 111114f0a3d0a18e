"""The composition root (serve.server.hosting.graph): the components both layouts build, in dependency order,
with the arguments each deployment's constructor takes. No Ray (the lists are plain data; the
layouts that build from them are exercised by the served tests)."""

from __future__ import annotations

import inspect

import pytest

from steadyrank.serve.server.hosting.graph import HUB, INGRESS_ARGS, Ref, components, live_judge
from steadyrank.serve.server.quality.service import GoldenProfile
from steadyrank.serve.settings import load_settings


def keys(graph) -> list[str]:
    return [c.key for c in graph]


@pytest.mark.parametrize(("layout", "shards"), [("colocated", 1), ("split", 1), ("split", 3)])
def test_every_reference_names_an_earlier_component_and_fits_its_constructor(layout, shards, tmp_path) -> None:
    settings = load_settings({"index": {"shards": shards}, "canary": {"path": str(tmp_path), "precision": "fp32"},
                              "deployments": {"layout": layout}})
    graph = components(settings)
    seen: set[str] = set()
    for component in graph:
        refs = [a.key for a in component.args if isinstance(a, Ref)]
        assert set(refs) <= seen, (component.key, refs, seen)
        cls = component.cls
        inspect.signature(cls.__init__).bind(None, *component.args)  # the arguments fit the constructor
        component.ray_options(settings)  # every component has its options
        seen.add(component.key)
    assert {k for k in INGRESS_ARGS} <= seen
    split_shards = shards > 1
    assert [k for k in keys(graph) if k.startswith("retriever_shard_")] == \
           ([f"retriever_shard_{i}" for i in range(shards)] if split_shards else [])
    retriever = next(c for c in graph if c.key == "retriever")
    assert retriever.deployment().name == "Retriever"
    assert retriever.args[1:] == ((HUB, *(Ref(f"retriever_shard_{i}") for i in range(shards))) if split_shards else ())
    if split_shards:
        names = [c.ray_options(settings)["name"] for c in graph if c.key.startswith("retriever_shard_")]
        assert names == [f"RetrieverShard{i}" for i in range(shards)]


def test_optional_components_follow_the_settings() -> None:
    plain = components(load_settings({"quality": {"enabled": False}}))
    assert keys(plain) == ["metrics_hub", "embedder", "reranker", "retriever", "searcher"]
    searcher = plain[-1]
    assert searcher.args[1:] == (Ref("embedder"), Ref("retriever"), Ref("reranker"), None, HUB)
    full = components(load_settings({"quality": {"enabled": True}, "search": {"default_mode": "bm25", "denoise": "off"}}))
    assert keys(full)[-1] == "evaluator"
    assert full[-1].args[1:] == (Ref("searcher"), HUB, ("primary",), GoldenProfile("bm25", "off"), None)
    judged = components(load_settings({"quality": {"live_judging": {"enabled": True, "store": "judged.jsonl"}}}))
    factory = judged[-1].args[-1]  # live judging on: the golden build judge's factory (default: bundled reranker)
    assert factory.func is live_judge and factory.args == (None,)
    reranker = next(c for c in full if c.key == "reranker")
    assert reranker.ray_options(load_settings({}))["name"] == "Reranker"


def _parameters(fn) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def test_every_handle_protocol_matches_its_deployment_class() -> None:
    """Each method a handle Protocol (serve.server.handles) declares exists on the deployment class it
    stands for, with the same parameters (names, kinds, defaults) as its ``remote``: the type checker
    verifies the HTTP layer's calls against these Protocols, so they must not drift from the classes."""
    import importlib
    from typing import get_origin, get_type_hints

    from steadyrank.serve.server import handles

    for protocol, (module, name) in handles.DEPLOYMENT_OF.items():
        cls = getattr(importlib.import_module(module), name)
        methods = {m: value for m, value in vars(protocol).items() if isinstance(value, property)}
        assert methods, protocol
        for method, prop in methods.items():
            shape = get_type_hints(prop.fget, vars(handles))["return"]  # e.g. _Rerank, _Ask[bytes]
            call_shape = get_origin(shape) or shape
            assert inspect.iscoroutinefunction(getattr(cls, method)), (name, method)
            assert _parameters(call_shape.remote) == _parameters(getattr(cls, method)), (name, method)

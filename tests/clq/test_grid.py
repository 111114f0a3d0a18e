"""Grid validation: every mistake is refused with a message naming the key; expansion counts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from steadyrank.serve.tools.clq.grid import GridError, expand, load_grid, parse_grid

VALID = {
    "embedders": [{"name": "minilm", "path": "bundled"}],
    "dimensions": ["full", "PCA64"],
    "ann": [{"name": "flat", "factory": "Flat"}, {"name": "hnsw", "factory": "HNSW16,Flat", "ef_search": 8}],
    "first_stages": ["dense", "bm25"],
    "k_policies": [{"name": "k10", "k": 10}, {"name": "dyn", "routing": {"k_low": 10, "k_high": 20}}],
    "rerankers": [{"name": "fp32", "path": "bundled"}, {"name": "bf16", "path": "bundled", "precision": "bf16",
                                                        "scoring": "native"}],
}


def _with(**changes) -> dict:
    return {**VALID, **changes}


def test_valid_grid_expands_dense_per_index_and_bm25_once(tmp_path: Path) -> None:
    grid = parse_grid(VALID, tmp_path)
    configs = expand(grid)
    # dense: 2 dims × 2 ann; bm25: 1 → 5 retrieval setups × 2 K × 2 rerankers
    assert len(configs) == 5 * 2 * 2
    assert len({c.config_id for c in configs}) == len(configs)
    assert {c.factory for c in configs} == {"Flat", "HNSW16,Flat", "PCA64,Flat", "PCA64,HNSW16,Flat", None}
    assert grid.k_policies[1].depth == 20


def test_routing_file_is_read_relative_to_the_grid(tmp_path: Path) -> None:
    (tmp_path / "routing.json").write_text('{"routing": {"k_low": 5, "k_high": 15}}')
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(_with(k_policies=[{"name": "d", "routing": "routing.json"}])))
    assert load_grid(tmp_path / "grid.yaml").k_policies[0].routing.k_high == 15


@pytest.mark.parametrize(("change", "message"), [
    ({"dimensions": ["full", "128"]}, r"dimensions\[1\]"),
    ({"dimensions": []}, "'dimensions' must be a non-empty list"),
    ({"first_stages": ["sparse"]}, r"first_stages\[0\]"),
    ({"ann": [{"name": "p", "factory": "PCA32,Flat"}]}, r"ann\[0\]"),
    ({"ann": [{"name": "h", "factory": "HNSW32,Flat", "ef_search": 0}]}, r"ann\[0\].ef_search"),
    ({"ann": [{"name": "a", "factory": "Flat"}, {"name": "a", "factory": "Flat"}]}, "duplicated"),
    ({"k_policies": [{"name": "x", "k": 10, "routing": {}}]}, "exactly one of"),
    ({"k_policies": [{"name": "x", "k": -1}]}, r"k_policies\[0\].k"),
    ({"k_policies": [{"name": "x", "routing": {"k_low": 80, "k_high": 20}}]}, r"k_policies\[0\].routing"),
    ({"k_policies": [{"name": "x", "routing": "missing.json"}]}, r"k_policies\[0\].routing"),
    ({"rerankers": [{"name": "r", "path": "bundled", "precision": "int8"}]}, r"rerankers\[0\].precision"),
    ({"rerankers": [{"name": "r", "path": "no/such/model"}]}, "does not exist"),
    ({"prices": {"rerank_per_1k_tokens": -1}}, "prices.rerank_per_1k_tokens"),
    ({"prices": {"per_token": 1}}, "unknown key"),
    ({"quality": "nonsense@3"}, "quality"),
    ({"bounds": {"sla_ms": "fast"}}, "bounds.sla_ms"),
    ({"latency": {"stat": "p99_ms"}}, "latency.stat"),
    ({"colour": "blue"}, "unknown key"),
])
def test_invalid_grids_are_refused(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(GridError, match=message):
        parse_grid(_with(**change), tmp_path)


def test_missing_key_and_bad_yaml(tmp_path: Path) -> None:
    data = dict(VALID)
    del data["rerankers"]
    with pytest.raises(GridError, match="missing key 'rerankers'"):
        parse_grid(data, tmp_path)
    (tmp_path / "bad.yaml").write_text("embedders: [unclosed")
    with pytest.raises(GridError, match="not valid YAML"):
        load_grid(tmp_path / "bad.yaml")

"""Settings: defaults, files, field-named errors, deployment options; the deploy/ configs."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import yaml

from steadyrank.serve.settings import AuthSettings, Settings, SettingsError, check_files, load_settings

ROOT = Path(__file__).resolve().parents[2]


def test_embedded_default() -> None:
    settings = Settings()
    assert settings.reranker is None and settings.reranker_model == settings.embedder
    assert settings.embedder.path is None and settings.quality.enabled
    policy = settings.routing_policy()
    assert (policy.k_low, policy.k_high, policy.top_n) == (50, 100, 10)
    options = settings.deployments.reranker.ray_options()
    assert options["num_replicas"] == 1 and options["ray_actor_options"]["num_cpus"] == 1.0
    assert settings.deployments.metrics_hub.ray_options()["num_replicas"] == 1
    check_files(settings)


def test_partial_deployment_sections_keep_their_defaults() -> None:
    settings = load_settings({"deployments": {"layout": "split",
                                              "reranker": {"num_cpus": 2, "autoscaling": {"max_replicas": 8}}}})
    reranker = settings.deployments.reranker
    assert reranker.num_cpus == 2 and reranker.max_batch_size == 4 and reranker.max_queued_requests == 64
    options = reranker.ray_options()
    assert options["num_replicas"] == "auto"
    assert options["autoscaling_config"]["max_replicas"] == 8
    assert settings.deployments.embedder.max_batch_size == 32


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"deployments": {"reranker": {"num_cpus": -1}}}, "deployments.reranker.num_cpus"),
        ({"deployments": {"reranker": {"max_batch_size": 64}}}, "deployments.reranker"),
        ({"deployments": {"metrics_hub": {"num_replicas": 2}}}, "deployments.metrics_hub"),
        ({"deployments": {"rerankr": {}}}, "deployments.rerankr"),
        ({"deployments": {"layout": "mesh"}}, "deployments.layout"),
        ({"deployments": {"reranker": {"num_replicas": 2}}}, "reranker: more than one replica"),
        ({"deployments": {"ingress": {"autoscaling": {"max_replicas": 2}}}}, "ingress: more than one replica"),
        ({"index": {"shards": 2}}, "needs deployments.layout: split"),
        ({"limits": {"max_documents": 0}}, "limits.max_documents"),
        ({"reranker": {"precision": "int4"}}, "reranker.precision"),
        ({"routing": {"k_low": 200}}, "routing"),
        ({"routing": {"file": "/nonexistent/routing.json"}}, "routing"),
        ({"search": {"default_mode": "fuzzy"}}, "search.default_mode"),
        ({"auth": {"api_keys": ["has space"]}}, "auth.api_keys"),
        ({"quality": {"interval_s": 0}}, "quality.interval_s"),
        ({"typo_section": {}}, "typo_section"),
    ],
)
def test_errors_name_the_field(data: dict, fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment.replace(".", r"\.")):
        load_settings(data)


def test_file_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"_id": "a", "text": "hello"}) + "\n")
    (tmp_path / "s.yaml").write_text("index:\n  corpus: corpus.jsonl\ncache_dir: cache\n")
    settings = load_settings(tmp_path / "s.yaml")
    assert settings.index.corpus == str(tmp_path / "corpus.jsonl")
    assert settings.cache_path() == tmp_path / "cache"
    (tmp_path / "bad.yaml").write_text("index:\n  path: missing-index\n")
    with pytest.raises(SettingsError, match=r"index\.path: no index"):
        check_files(load_settings(tmp_path / "bad.yaml"))
    (tmp_path / "broken.yaml").write_text("index: [unclosed\n")
    with pytest.raises(SettingsError, match="not valid YAML"):
        load_settings(tmp_path / "broken.yaml")


def test_api_keys_from_settings_and_environment() -> None:
    auth = AuthSettings(api_keys=["a1"], api_keys_env="MY_KEYS")
    assert auth.resolved_keys({"MY_KEYS": " b2 , a1,,c3"}) == ["a1", "b2", "c3"]
    assert AuthSettings().resolved_keys({}) == []
    assert "a1" not in repr(auth)  # secrets are not printed


def test_deploy_settings_file_documents_every_field() -> None:
    path = ROOT / "deploy" / "settings.yaml"
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # no deprecated key in the shipped file
        settings = load_settings(path)
    check_files(settings)
    assert settings.model_dump() == Settings().model_dump()  # the file is the embedded default
    text = path.read_text()

    def fields(model, prefix=""):
        for name, _info in type(model).model_fields.items():
            yield name
            value = getattr(model, name)
            if hasattr(type(value), "model_fields"):
                yield from fields(value, f"{prefix}{name}.")

    for name in set(fields(Settings())):
        assert f"{name}:" in text, f"deploy/settings.yaml does not document {name!r}"


def test_serve_config_is_valid_ray_serve_config() -> None:
    from ray.serve.schema import ServeDeploySchema

    config = yaml.safe_load((ROOT / "deploy" / "serve_config.yaml").read_text())
    schema = ServeDeploySchema.model_validate(config) if hasattr(ServeDeploySchema, "model_validate") \
        else ServeDeploySchema.parse_obj(config)
    app = schema.applications[0]
    assert app.import_path == "steadyrank.serve.app:build_app"
    settings_arg = app.args["settings"]
    assert (ROOT / settings_arg).is_file()
    docs = yaml.safe_load_all((ROOT / "deploy" / "kuberay" / "rayservice.yaml").read_text())
    kuberay = next(d for d in docs if d and d["kind"] == "RayService")
    serve_v2 = yaml.safe_load(kuberay["spec"]["serveConfigV2"])
    assert serve_v2["applications"][0]["import_path"] == "steadyrank.serve.app:build_app"


def test_build_app_builds_the_graph_without_ray_running() -> None:
    from steadyrank.serve.server.hosting.builder import build_app

    app = build_app({"settings": "deploy/settings.yaml"})
    assert type(app).__name__ == "Application"
    with pytest.raises(SettingsError, match="unknown argument"):
        build_app({"setting": "x"})


def test_serve_command_help_and_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In process (``main``): a bad settings file is refused before anything starts."""
    from steadyrank.serve.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(["serve", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for option in ("--config", "--host", "--port", "embedded default", "/v1/rerank", "Ctrl-C"):
        assert option in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("limits:\n  max_documents: -3\n")
    assert main(["serve", "--config", str(bad)]) == 2
    assert "limits.max_documents" in capsys.readouterr().err


def test_colocated_replica_reserves_what_its_components_reserve() -> None:
    """The colocated layout's one replica asks Ray for the sum of its components' CPUs and GPUs (so
    the total reserved is the same in both layouts), with the ingress' request limits."""
    settings = load_settings({"canary": {"precision": "bf16"},
                              "deployments": {"reranker": {"num_gpus": 0.5}, "canary_reranker": {"num_gpus": 0.25}}})
    assert settings.deployments.layout == "colocated"
    d = settings.deployments
    for canary, evaluator in [(True, True), (False, True), (False, False)]:
        options = d.colocated_options(canary=canary, evaluator=evaluator)
        assert options["ray_actor_options"]["num_cpus"] == pytest.approx(d.total_cpus(canary=canary, evaluator=evaluator))
        assert options["ray_actor_options"]["num_gpus"] == pytest.approx(0.75 if canary else 0.5)
        assert options["num_replicas"] == 1 and options["max_ongoing_requests"] == d.ingress.max_ongoing_requests


#: A value for every ``RoutingSettings`` field, none of them its default (the model_* fields fitted together).
ROUTING = {"k_low": 20, "k_high": 40, "top_n": 5, "margin_at": 5, "margin_below": 0.1, "entropy_temperature": 0.2,
           "entropy_above": 0.9, "tie_enabled": False, "overlap_at": 5, "overlap_below": 0.3, "boundary_at": 4,
           "boundary_below": 0.5, "tail_mass_above": 0.4, "first_stage_gap_below": 0.05,
           "model_features": ["dense_margin", "tail_mass"], "model_mean": [0.1, 0.2], "model_scale": [0.3, 0.4],
           "model_coef": [1.5, -0.5], "model_intercept": -0.25, "model_above": 0.6}


def test_every_routing_field_is_a_setting_that_reaches_the_searcher(tmp_path: Path) -> None:
    """Each field of the routing policy can be set in the settings file, and the Searcher (the
    router of /v1/search) runs with it; a file's value is overridden by the settings' own."""
    from dataclasses import fields as dataclass_fields

    from steadyrank.retrieval.routing import RoutingSettings, save_settings
    from steadyrank.serve.server.components.metrics_hub import MetricsHub
    from steadyrank.serve.server.components.searcher import Searcher

    assert set(ROUTING) == {f.name for f in dataclass_fields(RoutingSettings)}  # a new field needs a value here
    for name, default in RoutingSettings().to_json().items():
        assert ROUTING[name] != (list(default) if isinstance(default, tuple) else default), name
    (tmp_path / "settings.yaml").write_text(yaml.safe_dump({"routing": ROUTING, "limits": {"max_top_n": 40}}))
    settings = load_settings(tmp_path / "settings.yaml")
    expected = RoutingSettings.from_json(ROUTING)
    searcher = Searcher(settings, None, None, None, None, MetricsHub().store)
    assert searcher.policy == expected

    save_settings(tmp_path / "routing.json", RoutingSettings(k_low=30, k_high=120, boundary_below=0.9, top_n=7))
    layered = load_settings({"routing": {"file": str(tmp_path / "routing.json"), "boundary_below": 0.2}}).routing_policy()
    assert (layered.k_low, layered.k_high, layered.top_n, layered.boundary_below) == (30, 120, 7, 0.2)


def test_routing_disable_switches_off_every_threshold() -> None:
    from typing import get_args

    from steadyrank.retrieval.routing import RoutingSignals, decide
    from steadyrank.serve.settings import Signal

    signals = RoutingSignals(n_candidates=100, boundary_gap=0.1, tail_mass=0.9, first_stage_gap=0.01)
    routing = {"boundary_below": 0.5, "tail_mass_above": 0.4, "first_stage_gap_below": 0.05}
    assert decide(signals, load_settings({"routing": routing}).routing_policy()).codes == \
        ("boundary_gap", "tail_mass", "first_stage_gap")
    every = load_settings({"routing": {**ROUTING, "disable": list(get_args(Signal))},
                           "limits": {"max_top_n": 40}}).routing_policy()
    thresholds = ("margin_below", "entropy_above", "overlap_below", "boundary_below", "tail_mass_above",
                  "first_stage_gap_below", "model_above")
    assert [getattr(every, name) for name in thresholds] == [None] * len(thresholds)
    assert not decide(signals, every).escalated


def test_a_bare_yaml_off_is_the_off_denoise_mode(tmp_path) -> None:
    from steadyrank.serve.settings import load_settings

    path = tmp_path / "s.yaml"
    path.write_text("search:\n  denoise: off\n")
    assert load_settings(path).search.denoise == "off"
    assert load_settings().search.denoise == "off"  # the embedded default

"""``steadyrank serve``'s flags over the settings, the secure-by-default bind rule, keys from a file,
and GPUs against devices (what ``serve --check`` reports). Settings only: no Ray, no model load."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from steadyrank.serve.launcher.gpus import gpu_report, host_gpus
from steadyrank.serve.launcher.overrides import ServeFlags, apply_flags
from steadyrank.serve.runtime.hub import hub_id_of_cache_folder, is_hub_id
from steadyrank.serve.runtime.settings import device_gpus
from steadyrank.serve.settings import AuthSettings, SettingsError, is_loopback, load_settings, read_settings_file

# -- model references ------------------------------------------------------------------------------


def test_hub_id_shapes() -> None:
    assert is_hub_id("BAAI/bge-reranker-v2-m3") and is_hub_id("gpt2") and is_hub_id("org/name.v1_2")
    for not_id in ("./model", "/models/x", "a/b/c", "../x", "org/../x", "~/m", "", "org/"):
        assert not is_hub_id(not_id), not_id


def test_cache_snapshot_folder_names_its_hub_id() -> None:
    folder = Path("/cache/hub/models--BAAI--bge-reranker-v2-m3/snapshots/" + "a" * 40)
    assert hub_id_of_cache_folder(folder) == "BAAI/bge-reranker-v2-m3"
    assert hub_id_of_cache_folder(Path("/models/bge-reranker")) is None


def test_a_hub_id_in_a_settings_file_is_not_made_a_path(tmp_path: Path) -> None:
    (tmp_path / "local-model").mkdir()
    file = tmp_path / "s.yaml"
    file.write_text("reranker: {path: BAAI/bge-reranker-v2-m3}\nembedder: {path: local-model}\ncanary: {path: ./x/y}\n")
    data = read_settings_file(file)
    assert data["reranker"]["path"] == "BAAI/bge-reranker-v2-m3"
    assert data["embedder"]["path"] == str(tmp_path / "local-model")  # an existing folder stays a folder
    assert data["canary"]["path"] == str(tmp_path / "x" / "y")


# -- flags -----------------------------------------------------------------------------------------


def test_flags_override_the_settings_and_drop_the_replaced_models_pins() -> None:
    raw = {"reranker": {"path": "old/model", "revision": "abc", "served_id": "old", "precision": "fp32"},
           "http": {"port": 9000}, "auth": {"api_keys_env": "K"}}
    data, notes = apply_flags(raw, ServeFlags(reranker="new/model", dtype="bf16", device="cuda:1", port=8123,
                                              host="0.0.0.0", api_key_file="/run/keys"))
    assert data["reranker"] == {"path": "new/model", "precision": "bf16", "device": "cuda:1"}
    assert data["embedder"] == {"precision": "bf16", "device": "cuda:1"}
    assert data["http"] == {"port": 8123, "host": "0.0.0.0"}
    assert data["auth"] == {"api_keys_env": "K", "keys_file": "/run/keys"}
    assert raw["reranker"]["path"] == "old/model" and notes == []  # the input mapping is left as it was


def test_dtype_without_a_reranker_applies_to_the_embedder_only() -> None:
    data, _ = apply_flags({}, ServeFlags(dtype="fp16"))
    assert data == {"embedder": {"precision": "fp16"}}
    assert load_settings(data).embedder.precision == "fp16" and load_settings(data).reranker is None


def test_replicas_switch_the_colocated_layout_to_split_and_say_so() -> None:
    data, notes = apply_flags({}, ServeFlags(replicas=3))
    settings = load_settings(data)
    assert settings.deployments.layout == "split"
    assert settings.deployments.reranker.num_replicas == 3 and settings.deployments.embedder.num_replicas == 3
    assert notes and "split" in notes[0]
    with pytest.raises(ValueError, match="--replicas conflicts with deployments.reranker.autoscaling"):
        apply_flags({"deployments": {"layout": "split", "reranker": {"autoscaling": {"max_replicas": 3}}}},
                    ServeFlags(replicas=2))
    with pytest.raises(SettingsError, match="serve --replicas N"):
        load_settings({"deployments": {"reranker": {"num_replicas": 2}}})


# -- secure by default -----------------------------------------------------------------------------


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "", "10.0.0.5", "example.org"))


def test_a_non_loopback_bind_without_keys_is_refused_unless_anonymous_is_allowed() -> None:
    assert AuthSettings().check_bind("127.0.0.1", environ={}) == 0
    with pytest.raises(SettingsError, match=r"no API key is configured and the server would listen on '0.0.0.0'.*"
                                            r"--api-key-file.*allow_anonymous: true"):
        AuthSettings().check_bind("0.0.0.0", environ={})
    assert AuthSettings(allow_anonymous=True).check_bind("0.0.0.0", environ={}) == 0
    assert AuthSettings().check_bind("0.0.0.0", environ={"STEADYRANK_API_KEYS": "k1,k2"}) == 2


def test_keys_from_a_file_like_a_mounted_kubernetes_secret(tmp_path: Path) -> None:
    keys = tmp_path / "api-keys"
    keys.write_text("# rotated 2026-11\nkey-one\n\nkey-two, key-three  # the new one\nkey-one\n")
    auth = AuthSettings(api_keys=["inline"], keys_file=str(keys))
    assert auth.resolved_keys({"STEADYRANK_API_KEYS": "from-env"}) == [
        "inline", "key-one", "key-two", "key-three", "from-env"]
    assert auth.check_bind("0.0.0.0", environ={}) == 4
    with pytest.raises(SettingsError, match="auth.keys_file: cannot read"):
        AuthSettings(keys_file=str(tmp_path / "missing")).resolved_keys({})


@pytest.mark.parametrize("text", ["", "\n\n", "# keys go here\n  # none yet\n", " , ,\n"],
                         ids=["empty", "blank lines", "comments only", "commas only"])
def test_a_keys_file_without_a_key_is_an_error_naming_the_file(tmp_path: Path, text: str) -> None:
    """An empty Secret must not turn into "no key at all" (every route open): the start fails,
    on a loopback address too."""
    keys = tmp_path / "api-keys"
    keys.write_text(text)
    auth = AuthSettings(keys_file=str(keys))
    with pytest.raises(SettingsError, match=rf"auth.keys_file: {keys} holds no key"):
        auth.check_bind("127.0.0.1", environ={})
    with pytest.raises(SettingsError, match="holds no key"):
        AuthSettings(keys_file=str(keys), api_keys=["inline"]).resolved_keys({})


def test_keys_file_is_relative_to_the_settings_file(tmp_path: Path) -> None:
    (tmp_path / "keys").write_text("k\n")
    (tmp_path / "s.yaml").write_text("auth: {keys_file: keys}\n")
    assert load_settings(tmp_path / "s.yaml").auth.resolved_keys({}) == ["k"]


@pytest.mark.e2e
def test_serve_refuses_an_open_bind_before_starting_anything(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "steadyrank.serve.cli", "serve", "--host", "0.0.0.0", "--check"],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "STEADYRANK_CACHE": str(tmp_path)})
    assert done.returncode == 2
    assert "no API key is configured and the server would listen on '0.0.0.0'" in done.stderr
    assert "index at" not in done.stderr  # refused before the index is built


# -- GPUs against devices --------------------------------------------------------------------------


def test_device_gpus() -> None:
    assert [device_gpus(d) for d in ("auto", "cpu", "cuda", "cuda:0", "cuda:3")] == [0, 0, 1, 1, 4]
    with pytest.raises(SettingsError, match="device"):
        load_settings({"reranker": {"path": "x", "device": "gpu"}})


def test_num_gpus_is_derived_from_the_device() -> None:
    split = load_settings({"reranker": {"path": "x", "device": "cuda"}, "deployments": {"layout": "split"}})
    assert split.deployments.reranker.num_gpus == 1 and split.deployments.embedder.num_gpus == 0
    assert split.deployments.reranker.ray_options()["ray_actor_options"]["num_gpus"] == 1
    colocated = load_settings({"reranker": {"path": "x", "device": "cuda:1"}, "embedder": {"device": "cuda"}})
    options = colocated.deployments.colocated_options(canary=False, evaluator=True)
    assert options["ray_actor_options"]["num_gpus"] == 2  # the models share the replica's GPUs; cuda:1 needs 2


def test_a_gpu_device_on_a_replica_without_gpus_is_a_settings_error() -> None:
    with pytest.raises(SettingsError, match=r"reranker.device is cuda, but deployments.reranker.num_gpus is 0"):
        load_settings({"reranker": {"path": "x", "device": "cuda"},
                       "deployments": {"layout": "split", "reranker": {"num_gpus": 0}}})
    with pytest.raises(SettingsError, match=r"reranker.device is cuda:1, but deployments.reranker.num_gpus is 1"):
        load_settings({"reranker": {"path": "x", "device": "cuda:1"},
                       "deployments": {"layout": "split", "reranker": {"num_gpus": 1}}})


def test_gpu_report_against_the_host() -> None:
    cuda = load_settings({"reranker": {"path": "x", "device": "cuda"}})
    with pytest.raises(SettingsError, match=r"deployments reserve 1 GPU\(s\) but this host has 0"):
        gpu_report(cuda, local=True, gpus=0)
    assert gpu_report(cuda, local=False, gpus=0) == []  # a cluster's GPUs are not this host's
    assert gpu_report(cuda, local=True, gpus=1) == []
    auto = load_settings({})
    warnings = gpu_report(auto, local=True, gpus=2)
    assert len(warnings) == 2 and all("Ray hides this host's 2 GPU(s)" in w for w in warnings)
    cpu_reserving = load_settings({"embedder": {"device": "cpu"}, "deployments": {"embedder": {"num_gpus": 1}}})
    assert any("reserves GPUs it never uses" in w for w in gpu_report(cpu_reserving, local=True, gpus=1))


def test_host_gpus_follows_cuda_visible_devices(tmp_path: Path) -> None:
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert host_gpus({}, dev=tmp_path) == 2
    assert host_gpus({"CUDA_VISIBLE_DEVICES": "1"}, dev=tmp_path) == 1
    assert host_gpus({"CUDA_VISIBLE_DEVICES": ""}, dev=tmp_path) == 0


# -- batch knobs -----------------------------------------------------------------------------------


def test_requests_per_dynamic_batch_follow_the_models_rows_per_forward_batch() -> None:
    default = load_settings({}).deployments
    assert (default.embedder.max_batch_size, default.reranker.max_batch_size) == (32, 4)
    gpu = load_settings({"embedder": {"batch_size": 64}, "reranker": {"path": "x", "batch_size": 64}}).deployments
    assert gpu.embedder.max_batch_size == 64  # 2 × 64 × 2 lanes, capped at max_ongoing_requests (64)
    assert gpu.reranker.max_batch_size == 16  # 64 / 2, capped at max_ongoing_requests (16)
    explicit = load_settings({"deployments": {"reranker": {"max_batch_size": 2}}}).deployments
    assert explicit.reranker.ray_options()["user_config"]["max_batch_size"] == 2


@pytest.mark.e2e
def test_serve_check_reports_a_gpu_device_the_host_cannot_give(tmp_path: Path) -> None:
    """``serve --check`` on a host without GPUs (CUDA_VISIBLE_DEVICES empty) and a model on cuda: one
    line naming the mismatch, before the index is built or Ray started."""
    from steadyrank.serve.runtime import bundled_embedder_path

    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "STEADYRANK_CACHE": str(tmp_path), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "steadyrank.serve.cli", "serve", "--reranker", str(bundled_embedder_path()),
                           "--device", "cuda", "--check"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2
    assert "deployments reserve 1 GPU(s) but this host has 0 (CUDA_VISIBLE_DEVICES=)" in done.stderr
    assert "index at" not in done.stderr and "Traceback" not in done.stderr

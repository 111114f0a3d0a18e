"""``steadyrank models pull`` and Hub ids in the settings, with the real ``huggingface_hub`` client
against the stand-in Hub (see conftest): downloads into the Hub cache, offline mode from the cache,
a revision pin, a gated model (401), a missing id (404), an unreachable Hub, and the served id."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

from tests.hub.conftest import GATED, REPO


def _snapshot(hf_home: Path, commit: str) -> Path:
    return hf_home / "hub" / f"models--{REPO.replace('/', '--')}" / "snapshots" / commit


def test_pull_downloads_the_head_of_main_into_the_hub_cache(hub, hf_home, steadyrank) -> None:
    done = steadyrank("models", "pull", REPO)
    assert done.returncode == 0, done.stderr
    folder = Path(done.stdout.strip())
    assert folder == _snapshot(hf_home, hub.commits.main)
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["BertForSequenceClassification"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(hub.repos[REPO]["commits"][hub.commits.main])
    for name, data in hub.repos[REPO]["commits"][hub.commits.main].items():
        assert (folder / name).read_bytes() == data, name
    assert f"{REPO} at commit {hub.commits.main}" in done.stderr


def test_offline_mode_serves_the_cached_copy_without_a_request(hub, hf_home, steadyrank) -> None:
    assert steadyrank("models", "pull", REPO).returncode == 0
    before = len(hub.requests)
    done = steadyrank("models", "pull", REPO, offline=True)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == _snapshot(hf_home, hub.commits.main)
    assert hub.requests[before:] == []  # HF_HUB_OFFLINE=1: not one request reached the Hub


def test_offline_mode_without_a_cached_copy_says_what_to_do(hub, steadyrank) -> None:
    before = len(hub.requests)
    done = steadyrank("models", "pull", REPO, offline=True)
    assert done.returncode == 2
    assert "HF_HUB_OFFLINE is set" in done.stderr
    assert f"run 'hf download {REPO} --local-dir DIR'" in done.stderr and "pass DIR" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one line, no traceback
    assert hub.requests[before:] == []


def test_unreachable_hub_without_a_cached_copy_says_what_to_do(steadyrank) -> None:
    with socket.socket() as sock:  # a port with nothing listening
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    done = steadyrank("models", "pull", REPO, endpoint=closed)
    assert done.returncode == 2
    assert "not a local folder and the Hub is unreachable" in done.stderr
    assert f"'hf download {REPO} --local-dir DIR'" in done.stderr


def test_a_revision_pin_downloads_that_commit(hub, hf_home, steadyrank) -> None:
    done = steadyrank("models", "pull", REPO, "--revision", "v1")
    assert done.returncode == 0, done.stderr
    pinned = Path(done.stdout.strip())
    assert pinned == _snapshot(hf_home, hub.commits.v1)
    head = Path(steadyrank("models", "pull", REPO).stdout.strip())
    assert head == _snapshot(hf_home, hub.commits.main)
    assert (pinned / "model.safetensors").read_bytes() != (head / "model.safetensors").read_bytes()
    by_commit = steadyrank("models", "pull", REPO, "--revision", hub.commits.v1, offline=True)
    assert Path(by_commit.stdout.strip()) == pinned, by_commit.stderr
    missing = steadyrank("models", "pull", REPO, "--revision", "no-such-branch")
    assert missing.returncode == 2 and "no revision 'no-such-branch' on the Hub" in missing.stderr


def test_a_gated_model_needs_a_token(hub, steadyrank) -> None:
    refused = steadyrank("models", "pull", GATED)
    assert refused.returncode == 2
    assert "a gated model on the Hub" in refused.stderr and "HF_TOKEN" in refused.stderr
    assert any(path.startswith(f"/api/models/{GATED}") for _, path in hub.requests)
    allowed = steadyrank("models", "pull", GATED, token=hub.token)
    assert allowed.returncode == 0, allowed.stderr


def test_a_missing_id_is_named(steadyrank) -> None:
    done = steadyrank("models", "pull", "steadyrank-test/no-such-model")
    assert done.returncode == 2
    assert "steadyrank-test/no-such-model: not a local folder and no such model on the Hub" in done.stderr


def test_a_hub_id_in_the_settings_is_served_under_its_id(hub, hf_home, steadyrank, tmp_path) -> None:
    """A settings file naming the reranker by Hub id (relative paths never turn it into a folder):
    it is downloaded at settings time and served under the id, aliases kept; a cache snapshot folder
    given as a path is served under its id too, not under its commit hash."""
    settings = tmp_path / "settings.yaml"
    settings.write_text(f"reranker:\n  path: {REPO}\n  revision: v1\nquality:\n  enabled: false\n")
    script = (
        "import sys, json\n"
        "from steadyrank.serve.server.hosting.builder import resolve_settings\n"
        "from steadyrank.serve.server.http.dialects.names import ServedNames\n"
        "s = resolve_settings(sys.argv[1])\n"
        "print(json.dumps({'path': s.reranker.path, 'revision': s.reranker.revision,\n"
        "                  'names': list(ServedNames.from_settings(s).reranker)}))\n"
    )
    done = steadyrank(python=[sys.executable, "-c", script, str(settings)])
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["path"] == str(_snapshot(hf_home, hub.commits.v1))
    assert found["revision"] == hub.commits.v1
    assert found["names"][0] == REPO and "rerank-v3.5" in found["names"]
    snapshot = tmp_path / "by-path.yaml"
    snapshot.write_text(f"reranker:\n  path: {found['path']}\nquality:\n  enabled: false\n")
    again = json.loads(steadyrank(python=[sys.executable, "-c", script, str(snapshot)], offline=True).stdout)
    assert again["names"][0] == REPO


def test_pull_every_hub_id_of_a_settings_file(hub, hf_home, steadyrank, tmp_path) -> None:
    """What the Kubernetes init containers run: `models pull --config` downloads each model the
    settings name by Hub id, at its revision; a local folder is left alone."""
    (tmp_path / "local").mkdir()
    settings = tmp_path / "settings.yaml"
    settings.write_text(f"reranker: {{path: {REPO}, revision: v1}}\ncanary: {{path: local}}\n")
    done = steadyrank("models", "pull", "--config", str(settings))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(_snapshot(hf_home, hub.commits.v1))]

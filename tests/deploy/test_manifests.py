"""The Kubernetes manifests parse and their parts agree: the KubeRay RayService (deploy/kuberay/) and
the single-node Deployment (deploy/kubernetes/). Checked: the settings in each ConfigMap validate
(split for KubeRay, colocated for one node, no key-less open bind); every pod mounts the settings
where the application reads them, the API-key Secret where ``auth.keys_file`` points and a models
volume that an init container fills with ``steadyrank models pull --config``; workers are probed on
/readyz; Ray's version equals the image's; PodMonitors and NetworkPolicies select existing pods and
ports, and a NetworkPolicy admits pods of other namespaces only by namespace and label together; every
pod runs as the image's non-root user, no container may gain privileges or keeps a capability; models
are pinned to a Hub commit. No cluster here: the objects are checked as data."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from steadyrank.serve.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SECRET = "steadyrank-api-keys"


def _docs(path: Path) -> dict[str, list[dict[str, Any]]]:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for doc in yaml.safe_load_all(path.read_text()):
        if doc:
            by_kind.setdefault(doc["kind"], []).append(doc)
    return by_kind


def _settings(config_map: dict[str, Any]) -> tuple[Settings, dict[str, Any]]:
    raw = yaml.safe_load(config_map["data"]["settings.yaml"])
    return Settings.model_validate(raw), raw


def _pod_templates(kind: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    if "RayService" in kind:
        cluster = kind["RayService"][0]["spec"]["rayClusterConfig"]
        return [cluster["headGroupSpec"]["template"]] + [g["template"] for g in cluster["workerGroupSpecs"]]
    return [d["spec"]["template"] for d in kind["Deployment"]]


def _mount_of(pod: dict[str, Any], container: dict[str, Any], source: str, name: str) -> dict[str, Any]:
    """The mount in ``container`` of the pod volume whose ``source`` (configMap, secret, …) is ``name``."""
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]  # every mount names an existing volume
        ref = volume.get(source, {})
        if ref.get("name") == name or ref.get("secretName") == name or ref.get("claimName") == name:
            return mount
    raise AssertionError(f"{container['name']}: no mount of {source} {name}")


def _ray_version(containerfile: Path) -> str:
    found = re.search(r"^ARG RAY_VERSION=(\S+)$", containerfile.read_text(), re.M)
    assert found, f"{containerfile}: no ARG RAY_VERSION"
    return found.group(1)


@pytest.mark.parametrize("manifest", ["kuberay/rayservice.yaml", "kubernetes/deployment.yaml"])
def test_every_pod_mounts_settings_keys_and_models(manifest: str) -> None:
    kind = _docs(DEPLOY / manifest)
    config_map = kind["ConfigMap"][0]
    settings, raw = _settings(config_map)
    keys_dir = str(Path(settings.auth.keys_file).parent)
    assert not settings.auth.allow_anonymous and settings.auth.keys_file
    assert settings.reranker is not None and "/" in settings.reranker.path  # a real model, by Hub id
    for pod in _pod_templates(kind):
        init = pod["spec"]["initContainers"]
        assert [c["command"][:3] for c in init] == [["steadyrank", "models", "pull"]]
        pulled_from = init[0]["command"][init[0]["command"].index("--config") + 1]
        for container in pod["spec"]["containers"] + init:
            settings_mount = _mount_of(pod, container, "configMap", config_map["metadata"]["name"])
            assert settings_mount["mountPath"] == pulled_from
            models = [m for m in container["volumeMounts"] if m["mountPath"] == "/models"]
            assert models, f"{container['name']}: no /models volume (HF_HOME of the image)"
        for container in pod["spec"]["containers"]:
            assert _mount_of(pod, container, "secret", SECRET)["mountPath"] == keys_dir
            assert {"name": "HF_HUB_OFFLINE", "value": "1"} in container["env"]


def test_kuberay_runs_split_with_the_images_ray_and_readyz_probes() -> None:
    kind = _docs(DEPLOY / "kuberay" / "rayservice.yaml")
    settings, _ = _settings(kind["ConfigMap"][0])
    assert settings.deployments.layout == "split"
    service = kind["RayService"][0]["spec"]
    cluster = service["rayClusterConfig"]
    versions = {cluster["rayVersion"], _ray_version(DEPLOY / "Containerfile"), _ray_version(DEPLOY / "Containerfile.cuda")}
    assert len(versions) == 1, versions
    serve_config = yaml.safe_load(service["serveConfigV2"])
    app = serve_config["applications"][0]
    assert app["import_path"] == "steadyrank.serve.app:build_app"
    pods = _pod_templates(kind)
    head_mount = _mount_of(pods[0], pods[0]["spec"]["containers"][0], "configMap", "steadyrank-settings")
    assert app["args"]["settings"] == head_mount["mountPath"]
    for group in cluster["workerGroupSpecs"]:
        probe = group["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]
        assert probe == {"path": "/readyz", "port": serve_config["http_options"]["port"]}
    assert "ray_actor_options" not in service["serveConfigV2"]  # a setting Ray Serve configs refuse here


def test_single_node_deployment_runs_colocated_and_probes_readyz() -> None:
    kind = _docs(DEPLOY / "kubernetes" / "deployment.yaml")
    settings, _ = _settings(kind["ConfigMap"][0])
    assert settings.deployments.layout == "colocated" and settings.http.host == "0.0.0.0"
    container = kind["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["args"][:2] == ["--config", "/etc/steadyrank/settings.yaml"]
    claims = {c["metadata"]["name"] for c in kind["PersistentVolumeClaim"]}
    volumes = kind["Deployment"][0]["spec"]["template"]["spec"]["volumes"]
    assert {v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v} <= claims
    assert kind["Service"][0]["spec"]["selector"] == kind["Deployment"][0]["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize("manifest", ["kuberay/rayservice.yaml", "kubernetes/deployment.yaml"])
def test_monitors_and_network_policies_select_real_pods_and_ports(manifest: str) -> None:
    kind = _docs(DEPLOY / manifest)
    pods = _pod_templates(kind)

    def selected(labels: dict[str, str]) -> list[dict[str, Any]]:
        return [p for p in pods if labels.items() <= p["metadata"]["labels"].items()]

    for monitor in kind["PodMonitor"]:
        chosen = selected(monitor["spec"]["selector"]["matchLabels"])
        assert chosen, monitor["metadata"]["name"]
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            for pod in chosen:
                ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
                assert endpoint["port"] in ports, (monitor["metadata"]["name"], endpoint["port"])
    for policy in kind["NetworkPolicy"]:
        assert selected(policy["spec"]["podSelector"]["matchLabels"]) == pods  # every pod is covered
        open_rules = [r for r in policy["spec"]["ingress"] if "from" not in r]
        assert [[p["port"] for p in r["ports"]] for r in open_rules] == [[8000]]  # only Serve is open to all
        for peer in (peer for rule in policy["spec"]["ingress"] for peer in rule.get("from", [])):
            # a peer of another namespace is named by its namespace AND its label, in one entry: a
            # namespaceSelector {} (any namespace) or one without a podSelector admits far more
            if "namespaceSelector" in peer:
                assert peer["namespaceSelector"].get("matchLabels"), (policy["metadata"]["name"], peer)
                assert peer.get("podSelector", {}).get("matchLabels"), (policy["metadata"]["name"], peer)
            else:
                assert peer["podSelector"]["matchLabels"] == policy["spec"]["podSelector"]["matchLabels"], peer


def _image_uid(containerfile: Path) -> int:
    """The uid of the image's ``USER`` (created by ``useradd --uid``): never root."""
    text = containerfile.read_text()
    user = re.search(r"^USER (\S+)$", text, re.M)
    created = re.search(r"useradd .*--uid (\d+) (\S+)", text)
    assert user and created and created.group(2) == user.group(1), f"{containerfile}: no USER made by useradd --uid"
    return int(created.group(1))


UNPRIVILEGED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@pytest.mark.parametrize("manifest", ["kuberay/rayservice.yaml", "kubernetes/deployment.yaml"])
def test_every_pod_runs_non_root_without_privileges(manifest: str) -> None:
    """The "restricted" Pod Security Standard: the pod runs as the image's own non-root user with
    the runtime's seccomp profile; every container (init containers and KubeRay's autoscaler
    sidecar too) may not gain privileges and drops every capability."""
    kind = _docs(DEPLOY / manifest)
    uids = {_image_uid(DEPLOY / "Containerfile"), _image_uid(DEPLOY / "Containerfile.cuda")}
    assert len(uids) == 1 and 0 not in uids, uids
    for pod in _pod_templates(kind):
        security = pod["spec"]["securityContext"]
        assert security["runAsNonRoot"] is True and {security["runAsUser"]} == uids, security
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}, security
        for container in pod["spec"]["containers"] + pod["spec"].get("initContainers", []):
            assert container.get("securityContext") == UNPRIVILEGED, container["name"]
    if "RayService" in kind:
        cluster = kind["RayService"][0]["spec"]["rayClusterConfig"]
        if cluster.get("enableInTreeAutoscaling"):
            assert cluster["autoscalerOptions"]["securityContext"] == UNPRIVILEGED


@pytest.mark.parametrize("manifest", ["kuberay/rayservice.yaml", "kubernetes/deployment.yaml"])
def test_models_are_pinned_to_a_hub_commit(manifest: str) -> None:
    """Every Hub model of the settings names a commit (40 hex digits), not a branch such as main:
    every pod, and every restart, pulls the same weights."""
    settings, _ = _settings(_docs(DEPLOY / manifest)["ConfigMap"][0])
    models = [m for m in (settings.embedder, settings.reranker, settings.canary) if m is not None and m.path]
    assert models
    for model in models:
        assert model.revision is not None and re.fullmatch(r"[0-9a-f]{40}", model.revision), (model.path, model.revision)


def test_kuberay_applies_the_serve_tuning_of_serve_config() -> None:
    service = _docs(DEPLOY / "kuberay" / "rayservice.yaml")["RayService"][0]["spec"]
    cluster_app = yaml.safe_load(service["serveConfigV2"])["applications"][0]
    local_app = yaml.safe_load((DEPLOY / "serve_config.yaml").read_text())["applications"][0]
    assert cluster_app["runtime_env"] == local_app["runtime_env"]

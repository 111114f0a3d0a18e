"""The container files build from the repository as written: every COPY source exists and every
package folder is copied; a wheel built from exactly what they copy installs into a fresh venv with
numpy alone (Python 3.10, the floor, where an interpreter exists) and there runs ``steadyrank
--version`` and ``steadyrank evaluate``, while the commands that need the server stack say which extra
to install. Where a container builder works, the CPU image is built and its /readyz answered."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # builds wheels and images, runs the CLI

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the dev extra installs tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILES = ["deploy/Containerfile", "deploy/Containerfile.cuda"]
QRELS = "q1 0 a 2\nq1 0 b 1\nq2 0 c 1\n"
RUN = "q1 Q0 a 1 0.9 t\nq1 Q0 b 2 0.9 t\nq2 Q0 d 1 0.5 t\nq2 Q0 c 2 0.5 t\n"


def copy_sources(containerfile: str) -> list[str]:
    """The build-context paths the file's COPY instructions read (multi-stage ``--from`` copies excluded)."""
    sources = []
    for line in (ROOT / containerfile).read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["COPY"] and not any(p.startswith("--from") for p in parts):
            sources += [p for p in parts[1:-1] if not p.startswith("--")]
    return sources


def package_folders() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(config["tool"]["setuptools"]["package-dir"].values())


@pytest.mark.parametrize("containerfile", CONTAINERFILES)
def test_every_copy_source_exists_and_every_package_is_copied(containerfile: str) -> None:
    sources = copy_sources(containerfile)
    missing = [s for s in sources if not (ROOT / s).exists()]
    assert not missing, f"{containerfile} copies what the repository lacks: {missing}"
    copied = {s.rstrip("/") for s in sources}
    assert package_folders() <= copied, f"{containerfile} misses package folders {package_folders() - copied}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert {project["readme"], *project["license-files"], "pyproject.toml"} <= copied


def _context(tmp: Path) -> Path:
    """A build context holding exactly what deploy/Containerfile copies before its `pip install`."""
    context = tmp / "context"
    context.mkdir()
    for source in copy_sources("deploy/Containerfile"):
        src = ROOT / source
        if src.is_dir():
            shutil.copytree(src, context / source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, context / source)
    return context


def _floor_python() -> str:
    """A Python 3.10 interpreter (requires-python's floor) when one runs here, else this one."""
    candidates = [shutil.which("python3.10"), "/root/.pyenv/versions/3.10.13/bin/python3.10"]
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "--version"], capture_output=True).returncode == 0:
            return candidate
    return sys.executable


def test_the_wheel_from_the_build_context_runs_evaluate_with_numpy_alone(tmp_path: Path) -> None:
    context = _context(tmp_path)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path / "dist"), str(context)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    wheel = next((tmp_path / "dist").glob("steadyrank-*.whl"))
    python = _floor_python()
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr
    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
                            capture_output=True, text=True, check=True).stdout
    assert {p["name"].lower() for p in json.loads(listed)} <= {"steadyrank", "numpy", "pip", "setuptools", "wheel"}
    cli = str(venv / "bin" / "steadyrank")
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    version = subprocess.run([cli, "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert version.returncode == 0 and re.fullmatch(r"steadyrank \d+\.\d+\.\d+\S*\n", version.stdout), version
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "run").write_text(RUN)
    evaluated = subprocess.run([cli, "evaluate", "--qrels", str(tmp_path / "qrels"), "--run", str(tmp_path / "run"),
                                "-m", "ndcg@10", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert evaluated.returncode == 0, evaluated.stderr
    assert "ndcg@10" in json.loads(evaluated.stdout)["metrics"]
    for command in (["serve", "--check"], ["search", "--help"], ["index", "build", "--help"], ["models", "pull", "x/y"]):
        done = subprocess.run([cli, *command], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "pip install 'steadyrank[server]'" in done.stderr and "Traceback" not in done.stderr, done.stderr


def _builder() -> tuple[list[str] | None, str]:
    """A working container builder command, or None and why there is none."""
    for tool in ("podman", "docker", "buildah"):
        if shutil.which(tool) is None:
            continue
        if tool == "buildah":
            return ["buildah", "bud"], ""
        probe = subprocess.run([tool, "info"], capture_output=True, text=True, timeout=30)
        if probe.returncode == 0:
            return [tool, "build"], ""
        return None, f"{tool} is installed but cannot build: {probe.stderr.strip().splitlines()[-1][:200]}"
    return None, "no container builder (podman, docker, buildah) on this machine"


def test_cpu_image_builds_and_answers_readyz() -> None:
    builder, why = _builder()
    if builder is None:
        pytest.skip(why)
    if os.environ.get("STEADYRANK_TEST_IMAGE_BUILD") != "1":
        pytest.skip(f"{builder[0]} works here; set STEADYRANK_TEST_IMAGE_BUILD=1 to build the image (it downloads "
                    "torch and the server stack, minutes)")
    tag = "steadyrank:test-build"
    subprocess.run([*builder, "-t", tag, "-f", "deploy/Containerfile", "."], cwd=ROOT, check=True, timeout=3600)
    tool = builder[0] if builder[0] != "buildah" else "podman"
    name = f"steadyrank-smoke-{os.getpid()}"
    keys = Path(tempfile.mkdtemp()) / "keys"
    keys.write_text("smoke-test-key\n")
    subprocess.run([tool, "run", "-d", "--rm", "--name", name, "-p", "127.0.0.1:18000:8000",
                    "-v", f"{keys}:/run/keys:ro", tag, "--api-key-file", "/run/keys"], check=True, timeout=120)
    try:
        import httpx

        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            try:
                if httpx.get("http://127.0.0.1:18000/readyz", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(5)
        pytest.fail("the image's server never answered /readyz")
    finally:
        subprocess.run([tool, "rm", "-f", name], capture_output=True, timeout=120)

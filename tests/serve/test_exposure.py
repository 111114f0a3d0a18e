"""Closed by default wherever the application is built (serve/server/hosting/exposure.py): Ray Serve's own
``serve run`` refuses, like ``steadyrank serve``, an application that would listen on a non-loopback
address without an API key, and the refusal says why and what to do.

The real ``serve`` CLI of this virtualenv runs ``build_app`` from its import path, with Ray Serve's
default address set to every interface (``RAY_SERVE_DEFAULT_HTTP_HOST``, what Serve binds when
nothing else says, and its default under HAProxy): it must exit with the refusal before any Ray
process starts. The refusals against a running Serve controller (a ``serve deploy`` build task, an
Ingress replica started after Serve moved to 0.0.0.0) are in ``test_exposure_served.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from steadyrank.serve.server.hosting.exposure import serve_http_host

SERVE = Path(sys.executable).parent / "serve"
REFUSAL = "no API key is configured and the server would listen on '0.0.0.0' (Ray Serve's http_options.host)"


def _serve_run(tmp_path: Path, settings: str, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "settings.yaml").write_text(settings)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "STEADYRANK_"))}
    clean.update(RAY_SERVE_DEFAULT_HTTP_HOST="0.0.0.0", RAY_TMPDIR=str(tmp_path / "ray"), **env)
    return subprocess.run([str(SERVE), "run", "steadyrank.serve.app:build_app", "settings=settings.yaml"],
                          cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=240)


@pytest.mark.e2e  # `serve run` in a process of its own
def test_serve_run_on_every_interface_without_a_key_refuses_to_start(tmp_path: Path) -> None:
    done = _serve_run(tmp_path, "quality: {enabled: false}\n")
    assert done.returncode != 0, done.stdout[-2000:]
    assert REFUSAL in done.stderr, done.stderr[-3000:]
    assert "auth.allow_anonymous: true" in done.stderr
    assert not (tmp_path / "ray").exists(), "Ray was started before the refusal"


@pytest.mark.e2e  # `serve run` in a process of its own
def test_serve_run_with_an_empty_keys_file_refuses_naming_it(tmp_path: Path) -> None:
    (tmp_path / "api-keys").write_text("# the Secret was created empty\n")
    done = _serve_run(tmp_path, "quality: {enabled: false}\nauth: {keys_file: api-keys}\n")
    assert done.returncode != 0
    assert f"auth.keys_file: {tmp_path / 'api-keys'} holds no key" in done.stderr, done.stderr[-3000:]


def test_without_ray_the_address_is_the_one_serve_start_would_bind() -> None:
    """No Ray (``serve run <import path>`` builds before it starts Ray): Serve's default address."""
    import ray
    from ray.serve.config import HTTPOptions

    if ray.is_initialized():
        pytest.skip("this session already runs Ray (the served case is in test_exposure_served.py)")
    assert serve_http_host() == HTTPOptions().host

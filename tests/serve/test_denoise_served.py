"""Long noisy queries do not stall the server (issue 36 item 2), on real Ray Serve.

The embedded default (colocated layout, ``limits.max_query_chars`` 4,000) is deployed beside the
session's application, on its index cache, with every CPU reservation shrunk to fit the test cluster
and an API key. Four searches asking for ``denoise: rules`` (the default before it became ``off``) of
4,000 characters of noise ("ty ty …": every word a set-off filler, the rescanning denoiser's worst case: 2.8 s each in
process) run at once while another thread probes ``/healthz``, which answers on the same event
loop as ``/v1/search``: before the fix the probe waited for the denoiser (12.5 s here); now
``rules`` is linear and runs on a worker thread.

What the denoiser adds is measured against a control on the same server: the same four searches
with ``denoise: off`` (embedding, BM25 and ranking of a 4,000-character query, which are not the
denoiser's). The bound is the issue's 100 ms, added to the control's worst probe rather than
absolute, because on a shared 2-core box the control alone reaches 100–120 ms at a load average
of 10–20 (quiet, both stay in the tens of milliseconds).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.serve.conftest import API_KEY, DEPLOYMENTS, ServeApp, app_beside

APP = "embedded"
NOISY = "ty " * 1333  # 3,999 characters


@pytest.fixture(scope="module")
def embedded_default(serve_app: ServeApp) -> Iterator[httpx.Client]:
    settings = {"cache_dir": str(serve_app.settings.cache_path()), "auth": {"api_keys": [API_KEY]},
                "deployments": {name: {"num_cpus": 0.01} for name in DEPLOYMENTS}}
    with app_beside(serve_app, settings, APP, timeout_s=120) as client:
        client.headers.update({"Authorization": f"Bearer {API_KEY}"})
        yield client


def _healthz_while_searching(client: httpx.Client, denoise: str) -> list[float]:
    """Seconds of each ``/healthz`` probe that ran while four noisy searches (``denoise``) ran at once."""
    url, headers = str(client.base_url), client.headers
    # every client built before the clock starts (building one costs this process tens of milliseconds)
    searchers = [httpx.Client(base_url=url, headers=headers, timeout=120) for _ in range(4)]
    prober = httpx.Client(base_url=url, timeout=120)
    answers: list[httpx.Response] = []
    latencies: list[float] = []
    searching = threading.Event()

    def search(searcher: httpx.Client) -> None:
        answers.append(searcher.post("/v1/search", json={"query": NOISY, "top_n": 3, "denoise": denoise}))

    def probe() -> None:
        while searching.is_set():
            started = time.perf_counter()
            assert prober.get("/healthz").status_code == 200
            latencies.append(time.perf_counter() - started)
            time.sleep(0.01)

    try:
        assert prober.get("/healthz").status_code == 200  # the probe's connection, opened at rest
        threads = [threading.Thread(target=search, args=(searcher,)) for searcher in searchers]
        probing = threading.Thread(target=probe)
        searching.set()
        probing.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        searching.clear()
        probing.join()
    finally:
        for each in (*searchers, prober):
            each.close()
    assert [a.status_code for a in answers] == [200] * 4, [a.text[:200] for a in answers]
    assert all(a.json()["meta"]["query"]["denoise"] == denoise for a in answers)
    assert latencies, "no /healthz probe completed while the searches ran"
    return latencies


def test_four_longest_noisy_searches_add_under_100_ms_to_healthz(embedded_default: httpx.Client) -> None:
    assert embedded_default.post("/v1/search", json={"query": "what is a sigmet"}).status_code == 200  # warm
    control = max(_healthz_while_searching(embedded_default, "off"))
    rules = _healthz_while_searching(embedded_default, "rules")
    assert max(rules) < control + 0.1, (
        f"worst /healthz {max(rules) * 1000:.0f} ms over {len(rules)} probes (control, denoise off: {control * 1000:.0f} ms)")

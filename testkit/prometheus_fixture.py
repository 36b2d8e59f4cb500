"""pytest plugin: a real, private Prometheus scraping an in-process :class:`TestExporter`.

Enable it from ``tests/conftest.py``::

    pytest_plugins = ["testkit.prometheus_fixture"]

Fixtures:

``prometheus_harness`` (session)
    Starts a :class:`~testkit.exporter.TestExporter` on a free port and Prometheus
    through ``scripts/prometheus.sh`` (free port, private state dir under pytest's tmp dir,
    1 s scrape interval), waits for the first real scrape, yields a
    :class:`PrometheusHarness`, and stops/wipes Prometheus at the end of the session.
``prometheus`` (function)
    The same harness, with the exporter state reset, Prometheus (re)started if an earlier
    test stopped it, and ``PROMETHEUS_URL`` set in the environment for the test.

Tests using either fixture get the ``prometheus`` marker automatically. When the
``prometheus`` binary is missing they are skipped, or fail when ``CI`` or
``TUNER_REQUIRE_PROMETHEUS`` is set (so CI cannot go green by skipping them); install it
with ``scripts/prometheus.sh install``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .exporter import GENERATION_METRIC, SCRAPE_SEQ_METRIC, TestExporter
from .scripts import run_script

__all__ = [
    "PrometheusHarness",
    "free_port",
    "prometheus",
    "prometheus_harness",
    "require_prometheus",
    "started",
]

JOB = "tuner-test-exporter"
SCRAPE_INTERVAL_S = 1.0
#: Prometheus' service discovery hands new targets to the scraper only every 5 s, so the
#: first scrape after a (re)start can take that long on top of the scrape interval.
FIRST_SCRAPE_TIMEOUT_S = 30.0
POLL_S = 0.1

Sample = dict[str, Any]


class PrometheusError(RuntimeError):
    """The Prometheus HTTP API answered with an error."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def require_prometheus() -> None:
    """Skip the test without the prometheus binary; fail instead under ``CI`` or
    ``TUNER_REQUIRE_PROMETHEUS``."""
    if not _prometheus_installed():
        msg = "prometheus is not installed: run scripts/prometheus.sh install"
        if os.environ.get("CI") or os.environ.get("TUNER_REQUIRE_PROMETHEUS"):
            pytest.fail(msg)
        pytest.skip(msg)


def _prometheus_installed() -> bool:
    return shutil.which("prometheus") is not None or Path("/usr/bin/prometheus").exists()


class PrometheusHarness:
    """A running private Prometheus plus the exporter it scrapes.

    :attr:`url` is the base URL (``http://127.0.0.1:PORT``), :attr:`exporter` the
    :class:`TestExporter` whose state the test sets, :attr:`job` the scrape job label.
    """

    def __init__(
        self, exporter: TestExporter, port: int, state_dir: Path, retention: str = "1d"
    ) -> None:
        self.exporter = exporter
        self.port = port
        self.state_dir = state_dir
        self.retention = retention
        """How long the TSDB keeps samples (longer for a backfilled history)."""
        self.job = JOB
        self.url = f"http://127.0.0.1:{port}"

    # ------------------------------------------------------------------ server control

    def script_env(self) -> dict[str, str]:
        """Environment for ``scripts/prometheus.sh`` addressing this instance."""
        return {
            **os.environ,
            "TUNER_PROM_PORT": str(self.port),
            "TUNER_PROM_TARGET": self.exporter.target,
            "TUNER_PROM_JOB": self.job,
            "TUNER_PROM_STATE_DIR": str(self.state_dir),
            "TUNER_PROM_SCRAPE_INTERVAL": f"{SCRAPE_INTERVAL_S:g}s",
            "TUNER_PROM_RETENTION": self.retention,
        }

    def _script(self, *args: str, timeout: float = 120.0) -> str:
        return run_script("prometheus.sh", args, self.script_env(), timeout)

    def start_prometheus(self, wait_for_scrape: bool = True) -> None:
        """Start (or keep) Prometheus; by default wait until it has ingested a scrape."""
        self._script("start")
        if wait_for_scrape:
            self.wait_for_scrapes(1, timeout=FIRST_SCRAPE_TIMEOUT_S)

    def stop_prometheus(self, keep_data: bool = True) -> None:
        """Stop Prometheus mid-test (its API then refuses connections).

        ``keep_data=True`` keeps the TSDB, so a later :meth:`start_prometheus` looks like a
        server restart; ``False`` wipes it like the end of the session does.
        """
        self._script("stop", *(["--keep-data"] if keep_data else []))

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Freeze the Prometheus process (SIGSTOP) for the block, then let it go on (SIGCONT).

        The kernel still accepts connections, but nothing answers: a hung, slow server.
        """
        pid = int((self.state_dir / "prometheus.pid").read_text().strip())
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def is_running(self) -> bool:
        """True when Prometheus answers ``/-/ready``."""
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def reload(self) -> None:
        """Re-render the config (e.g. after the exporter moved) and reload it."""
        self._script("reload")

    # ------------------------------------------------------------------ HTTP API

    def api(self, path: str, params: dict[str, str] | None = None, timeout: float = 10.0) -> Any:
        """GET ``/api/v1/<path>`` and return its ``data``; raises PrometheusError."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"{self.url}/api/v1/{path}{query}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as exc:  # 400/422/503 carry a JSON error body
            try:
                body = json.load(exc)
            except ValueError:
                raise PrometheusError(f"{url}: HTTP {exc.code}") from exc
        if body.get("status") != "success":
            raise PrometheusError(f"{url}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, promql: str, at: float | None = None) -> list[Sample]:
        """Instant query; returns samples ``[{"metric": {...}, "value": [t, "v"]}]``."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self.api("query", params)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def query_value(self, promql: str, at: float | None = None) -> float | None:
        """The single value of an instant query, or None for an empty result."""
        result = self.query(promql, at)
        if not result:
            return None
        if len(result) > 1:
            raise AssertionError(f"{promql!r} returned {len(result)} series: {result}")
        return float(result[0]["value"][1])

    def query_range(
        self, promql: str, start: float, end: float, step: float = SCRAPE_INTERVAL_S
    ) -> list[Sample]:
        """Range query; returns ``[{"metric": {...}, "values": [[t, "v"], ...]}]``."""
        data = self.api(
            "query_range",
            {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"},
        )
        return list(data["result"])

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets (``/api/v1/targets``)."""
        return list(self.api("targets")["activeTargets"])

    # ------------------------------------------------------------------ waiting on scrapes

    def wait_for_scrapes(self, n: int = 1, timeout: float | None = None) -> int:
        """Wait until Prometheus has *ingested* ``n`` scrapes taken after this call.

        Every state change made before the call is then visible to queries (the ``n``-th
        one is also covered by ``rate()`` windows of ``n`` intervals). Works by polling the
        exporter's ``tuner_test_exporter_scrape_seq`` through the query API: a scrape is
        committed atomically, so once its sequence number is queryable so is all of it.
        Returns the sequence number seen; raises TimeoutError with the target's state.
        """
        if n < 1:
            raise ValueError("n must be >= 1")
        wanted = self.exporter.scrape_count + n
        if timeout is None:
            timeout = FIRST_SCRAPE_TIMEOUT_S + n * SCRAPE_INTERVAL_S * 2
        seen = self.wait_until(
            f'max({SCRAPE_SEQ_METRIC}{{job="{self.job}"}})',
            lambda v: v is not None and v >= wanted,
            timeout=timeout,
            what=f"scrape #{wanted} ingested",
        )
        assert seen is not None
        return int(seen)

    def wait_until(
        self,
        promql: str,
        predicate: Callable[[float | None], bool],
        timeout: float = 30.0,
        what: str | None = None,
    ) -> float | None:
        """Poll the instant query ``promql`` until ``predicate(value)`` holds; return it.

        ``value`` is the single result's value or None when the result is empty. Connection
        errors count as "not yet" (e.g. Prometheus still starting).
        """
        deadline = time.monotonic() + timeout
        value: float | None = None
        last_error: Exception | None = None
        while True:
            try:
                value = self.query_value(promql)
                last_error = None
                if predicate(value):
                    return value
            except (PrometheusError, urllib.error.URLError, OSError) as exc:
                last_error = exc
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"timed out after {timeout}s waiting for {what or promql!r}: last value "
                    f"{value!r}, last error {last_error!r}, exporter served "
                    f"{self.exporter.scrape_count} scrapes, targets: {self._target_summary()}"
                )
            time.sleep(POLL_S)

    def wait_for_target_health(self, up: bool, timeout: float = FIRST_SCRAPE_TIMEOUT_S) -> None:
        """Wait until ``up{job=...}`` is 1 (``up=True``) or 0 — e.g. after exporter.stop()."""
        self.wait_until(
            f'up{{job="{self.job}"}}',
            lambda v: v == (1.0 if up else 0.0),
            timeout,
            what=f"up == {int(up)}",
        )

    def _target_summary(self) -> str:
        try:
            return (
                "; ".join(
                    f"{t['scrapeUrl']} {t['health']} {t.get('lastError') or ''}".strip()
                    for t in self.targets()
                )
                or "none yet"
            )
        except Exception as exc:  # diagnostics only
            return f"unavailable ({exc!r})"

    @property
    def generation_metric(self) -> str:
        """Name of the exporter's state-generation gauge (for custom waits)."""
        return GENERATION_METRIC


# ---------------------------------------------------------------------- pytest hooks


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "prometheus: needs the real Prometheus server (scripts/prometheus.sh)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test using the Prometheus fixtures, so ``-m 'not prometheus'`` skips them."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "prometheus" in names or "prometheus_harness" in names:
            item.add_marker(pytest.mark.prometheus)


# ---------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def prometheus_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusHarness]:
    """Session-wide Prometheus + exporter; stopped and wiped after the session."""
    require_prometheus()
    exporter = TestExporter().start()
    state_dir = tmp_path_factory.mktemp("prometheus")
    with started(PrometheusHarness(exporter, port=free_port(), state_dir=state_dir)) as harness:
        yield harness


@contextlib.contextmanager
def started(harness: PrometheusHarness) -> Iterator[PrometheusHarness]:
    """Start the harness' Prometheus and wait for a scrape; afterwards stop and wipe it and
    stop its (already started) exporter."""
    try:
        harness.start_prometheus(wait_for_scrape=True)
        yield harness
    finally:
        try:
            harness.stop_prometheus(keep_data=False)
        finally:
            harness.exporter.stop()


@pytest.fixture
def prometheus(
    prometheus_harness: PrometheusHarness, monkeypatch: pytest.MonkeyPatch
) -> PrometheusHarness:
    """Per-test view: exporter state reset, server running, ``PROMETHEUS_URL`` exported.

    Series of earlier tests stay in the TSDB (they go stale at the next scrape): set the
    state, call ``wait_for_scrapes()``, and use time windows that start in this test.
    """
    harness = prometheus_harness
    harness.exporter.start()  # in case a test stopped it
    harness.exporter.reset()
    if not harness.is_running():
        harness.start_prometheus(wait_for_scrape=True)
    monkeypatch.setenv("PROMETHEUS_URL", harness.url)
    return harness

"""``tuner monitor`` without a Prometheus: bad settings, and a Prometheus that is down, slow,
refusing or not Prometheus at all. Each must end in one clear message, never a traceback."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tuner.cli import main
from tuner.model.load import Load
from tuner.model.window_report import Verdict, WindowReport
from tuner.monitor.command import render_text
from tuner.monitor.evidence import Probe
from tuner.monitor.prometheus import PrometheusClient, QueryError
from tuner.settings import Prometheus

PRESENCE = Probe.PRESENCE.query("")


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


def tuner(capsys: pytest.CaptureFixture[str], *args: str) -> Run:
    """``tuner ARGS`` through the CLI's main() (an escaping exception fails the test)."""
    try:
        status = main(list(args))
    except SystemExit as exit:  # argparse refusing an argument
        status = int(exit.code or 0)
    out, err = capsys.readouterr()
    return Run(status, out, err)


def settings_file(tmp_path: Path, document: dict[str, object]) -> str:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(document))
    return str(path)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"load": {"query": "up", "typo": 1}}, "settings .*: load: unknown key 'typo'"),
        ({"prometheus": {"url": "http://x"}}, "load.query is not set"),
        ({"load": {"query": "up"}, "prometheus": {"url": "localhost:9090"}}, "prometheus.url"),
        ({"load": {"query": "up"}, "windows": {"measure_s": -5}}, "windows.measure_s"),
    ],
)
def test_bad_settings_are_one_line_and_exit_2(
    tmp_path: Path, document: dict[str, object], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = tuner(capsys, "monitor", "--settings", settings_file(tmp_path, document))
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("tuner: error: ")
    assert re.search(message, line), line
    assert result.stdout == ""


def test_a_non_positive_window_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    result = tuner(capsys, "monitor", "--window", "0")
    assert result.returncode == 2
    assert "window must be > 0 and <= 316224000 seconds" in result.stderr


def test_prometheus_down_gives_an_unknown_verdict_naming_the_query(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    path = settings_file(tmp_path, {"load": {"query": "up"}, "prometheus": {"url": url}})

    text = tuner(capsys, "monitor", "--settings", path)
    as_json = tuner(capsys, "monitor", "--settings", path, "--format", "json")

    assert text.returncode == 1
    assert text.stderr == ""
    lines = text.stdout.splitlines()
    assert "verdict:  unknown" in lines
    assert "load:     unknown" in lines
    assert f"failed:   {PRESENCE}" in lines
    assert f"stability query failed: Prometheus unreachable at {url}: " in text.stdout
    assert "Connection refused" in text.stdout
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 1
    assert (report["verdict"], report["load"], report["failed_query"]) == (
        "unknown",
        None,
        PRESENCE,
    )
    # The load history is not asked of a Prometheus that just failed (nor waited for again).
    assert "forecast: unavailable: not tried: Prometheus failed the window's query" in lines
    assert report["forecast"] is None
    assert report["forecast_unavailable"] == "not tried: Prometheus failed the window's query"


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers (a hung Prometheus)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


def test_a_slow_prometheus_times_out_into_unknown(
    tmp_path: Path, silent_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = settings_file(
        tmp_path,
        {"load": {"query": "up"}, "prometheus": {"url": silent_server, "timeout_s": 0.5}},
    )
    result = tuner(capsys, "monitor", "--settings", path, "--format", "json")
    report = json.loads(result.stdout)
    assert result.returncode == 1
    assert report["verdict"] == "unknown"
    assert report["failed_query"] == PRESENCE
    assert f"Prometheus at {silent_server} did not answer within 0.5 s" in report["reason"]


class Handler(BaseHTTPRequestHandler):
    """Answers like a login proxy (HTML), or 401 without the expected bearer token."""

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != "Bearer s3cret":
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b"Unauthorized\n")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html>please log in</html>")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_bearer_token_comes_from_the_named_environment_variable(proxy: str) -> None:
    settings = Prometheus(url=proxy, token_env="MY_PROM_TOKEN")
    without = PrometheusClient(settings, environ={})
    with without, pytest.raises(QueryError, match="HTTP 401: Unauthorized"):
        without.instant("up", 0.0)
    with_token = PrometheusClient(settings, environ={"MY_PROM_TOKEN": "s3cret"})
    with with_token, pytest.raises(QueryError, match=r"unexpected answer from .*: not JSON"):
        with_token.instant("up", 0.0)


class AnswerServer(ThreadingHTTPServer):
    """Not Prometheus, but speaks its envelope: answers every request with :attr:`body`."""

    body: object = None


class Answers(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        assert isinstance(self.server, AnswerServer)
        body = json.dumps(self.server.body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def answers() -> Iterator[AnswerServer]:
    server = AnswerServer(("127.0.0.1", 0), Answers)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _vector(*samples: object) -> dict[str, object]:
    result = [{"metric": {"pod": "web-1"}, "value": sample} for sample in samples]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_vector([1.7e9, "abc"]), "unexpected sample"),
        (_vector(["yesterday", "1"]), "unexpected sample"),
        (_vector(["NaN", "1"]), "unexpected sample"),
        (_vector([1.7e9]), "unexpected sample"),
        (_vector("1"), "unexpected sample"),
        (
            {"status": "success", "data": {"resultType": "vector", "result": [7]}},
            "unexpected series",
        ),
        ({"status": "success", "data": {"resultType": "vector", "result": {}}}, "not a list"),
        ({"status": "success"}, "unexpected answer from"),
        (["not", "an", "object"], "unexpected answer from"),
    ],
)
def test_an_answer_of_an_unexpected_shape_is_a_query_error(
    answers: AnswerServer, body: object, message: str
) -> None:
    answers.body = body
    url = f"http://127.0.0.1:{answers.server_address[1]}"
    with PrometheusClient(Prometheus(url=url)) as client:
        with pytest.raises(QueryError, match=message) as caught:
            client.instant("sum(up)", 1.7e9)
        assert caught.value.query == "sum(up)"
        with pytest.raises(QueryError, match="sum\\(up\\)"):
            client.range("sum(up)", 1.7e9, 1.7e9 + 10, 5)


def test_text_report_lists_a_load_vector_and_every_finding() -> None:
    report = WindowReport(
        verdict=Verdict.UNSTABLE,
        reason="node n3 appeared at 12:00:05Z (+1 more)",
        load=Load.vector({'{service="web"}': 100.0, '{service="api"}': 30.0}),
        start=1_700_000_000.0,
        end=1_700_000_600.0,
        checked_from=1_699_999_880.0,
        findings=("node n3 appeared at 12:00:05Z", "pending pods: shop/web-1"),
        load_query="sum by (service) (rate(http_requests_total[600s]))",
    )
    text = render_text(report)
    assert "(600 s), stability checked from " in text
    assert "(warm-up 120 s)" in text
    assert "load:     2 dimensions, total 130" in text
    assert '{service="api"}  30' in text
    assert '{service="web"}  100' in text
    assert "verdict:  unstable" in text
    assert text.endswith("  - node n3 appeared at 12:00:05Z\n  - pending pods: shop/web-1")

"""The Kubernetes API as the tuner's clients see it, with faults a real API server does not
produce on demand: a server that accepts and never answers, one that sends the same
``continue`` token again, and (as a fast double beside the two-API-server test on the real
control plane, ``tests/e2e/test_api_server.py``) two servers to tell which one a request
reached. Small HTTP servers on loopback stand for them."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes.config import incluster_config

from testkit.cluster_fixture import eventually
from testkit.hostile import kubeconfig, silent_server
from tuner.cli import main
from tuner.errors import ServiceError
from tuner.monitor import kube
from tuner.monitor.cache import ClusterCache
from tuner.monitor.kube import KINDS, api_client, read_cluster
from tuner.settings import Kubernetes


class ApiServer(ThreadingHTTPServer):
    """Answers every list with an empty page (``token``: its ``continue`` token) and records
    each request's path and Authorization header."""

    token = ""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Lists)
        self.requests: list[tuple[str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Lists(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        assert isinstance(self.server, ApiServer)
        self.server.requests.append((self.path, self.headers.get("Authorization", "")))
        token = self.server.token
        if token == "new":  # a new token every page: a list without end
            token = f"page-{len(self.server.requests)}"
        metadata = {"resourceVersion": "7", "continue": token}
        body = json.dumps({"metadata": metadata, "items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[tuple[ApiServer, ApiServer]]:
    pair = (ApiServer(), ApiServer())
    for server in pair:
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield pair
    for server in pair:
        server.shutdown()
        server.server_close()


EXEC_PLUGIN = {
    "exec": {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": [
            "-c",
            "import json; print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1',"
            " 'kind': 'ExecCredential', 'status': {'token': 'from-exec'}}))",
        ],
        "interactiveMode": "Never",
    }
}


@pytest.mark.parametrize(
    ("user", "authorization"),
    [({"token": "t0ken"}, "Bearer t0ken"), (EXEC_PLUGIN, "Bearer from-exec"), ({}, "")],
)
def test_every_request_goes_to_the_configured_api_server(
    servers: tuple[ApiServer, ApiServer],
    tmp_path: Path,
    user: dict[str, Any],
    authorization: str,
) -> None:
    """The kubeconfig names A with a token (or exec plugin) user; ``api_server`` names B."""
    a, b = servers
    config = kubeconfig(tmp_path / "kubeconfig", a.url, user)
    settings = Kubernetes(kubeconfig=str(config), api_server=b.url)
    with api_client(settings) as api:
        read_cluster(api)
        read_cluster(api)
    assert a.requests == []
    assert len(b.requests) == 2 * len(KINDS)
    assert {header for _path, header in b.requests} == {authorization}


def test_in_cluster_every_request_goes_to_the_configured_api_server(
    servers: tuple[ApiServer, ApiServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service account's loader (its token file re-read by the same refresh hook) names
    A through the service environment; ``api_server`` names B."""
    a, b = servers
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("not used: B is plain HTTP")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(a.server_address[1]))
    with api_client(Kubernetes(in_cluster=True, api_server=b.url)) as api:
        read_cluster(api)
    assert a.requests == []
    assert {header for _path, header in b.requests} == {
        "bearer sa-token"
    }  # the loader's own spelling


def test_a_repeated_continue_token_ends_the_read(
    servers: tuple[ApiServer, ApiServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, _b = servers
    a.token = "the-same-token"
    config = kubeconfig(tmp_path / "kubeconfig", a.url, {"token": "t"})
    with api_client(Kubernetes(kubeconfig=str(config))) as api, pytest.raises(ServiceError) as e:
        read_cluster(api)
    assert str(e.value) == "kubernetes API: the list of Node sent the same continue token twice"
    assert len(a.requests) == 2


def test_a_list_without_end_is_cut_after_the_most_pages(
    servers: tuple[ApiServer, ApiServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _b = servers
    a.token = "new"
    monkeypatch.setattr(kube, "MAX_PAGES", 5)
    config = kubeconfig(tmp_path / "kubeconfig", a.url, {"token": "t"})
    with api_client(Kubernetes(kubeconfig=str(config))) as api, pytest.raises(ServiceError) as e:
        read_cluster(api)
    assert str(e.value) == "kubernetes API: the list of Node did not end after 5 pages"
    assert len(a.requests) == 6


@pytest.fixture
def silent() -> Iterator[tuple[str, threading.Event]]:
    with silent_server() as server:
        yield server


def test_an_api_server_that_never_answers_fails_the_read_after_the_timeout(
    silent: tuple[str, threading.Event], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = silent
    config = kubeconfig(tmp_path / "kubeconfig", url, {"token": "t"})
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"kubernetes": {"kubeconfig": str(config), "timeout_s": 1}}))
    started = time.monotonic()
    assert main(["plan", "--live", "--settings", str(settings)]) == 1
    assert time.monotonic() - started < 30
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "kubernetes API unreachable" in lines[0] and "timed out" in lines[0]


def test_the_cache_counts_a_repeated_continue_token_as_a_failed_list(
    servers: tuple[ApiServer, ApiServer], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a, _b = servers
    a.token = "the-same-token"
    config = kubeconfig(tmp_path / "kubeconfig", a.url, {"token": "t"})
    with api_client(Kubernetes(kubeconfig=str(config))) as api:
        cache = ClusterCache(api, ["Node"], backoff_s=60)
        with cache:
            assert not cache.wait_synced(0.5)
            assert eventually(lambda: "continue token twice" in cache.why(), 30)
    assert "watcher failed" not in caplog.text  # an expected failure, not a bug's traceback

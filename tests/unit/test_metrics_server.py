"""The daemon's /metrics and /healthz server against slow and many clients, a short file
descriptor limit, and addresses it cannot listen on (real sockets, real processes)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.hostile import http_status, idle_connections, kubeconfig
from tuner.cli import main
from tuner.daemon import metrics as metrics_module
from tuner.daemon.http_server import BoundedServer, connection_cap
from tuner.daemon.metrics import Metrics


@pytest.fixture(name="served")
def served_fixture() -> Iterator[BoundedServer]:
    """The daemon's metrics server on a free port, never stale."""
    server = Metrics(stale_after_s=1e9).serve(0, "127.0.0.1")
    yield server
    server.shutdown()
    server.server_close()


def test_more_idle_connections_than_the_cap_leave_healthz_reachable(
    served: BoundedServer,
) -> None:
    port = served.server_address[1]
    idle = idle_connections(port, served.cap + 20)
    try:
        assert http_status(port) == 200
        assert served.open_connections <= served.cap
        idle[0].settimeout(10)
        assert idle[0].recv(1) == b""  # the oldest was closed to make room
    finally:
        for connection in idle:
            connection.close()


def test_a_silent_connection_is_closed_after_the_read_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(metrics_module, "READ_TIMEOUT_S", 0.3)
    server = Metrics(stale_after_s=1e9).serve(0, "127.0.0.1")
    try:
        (silent,) = idle_connections(server.server_address[1], 1)
        with silent:
            silent.settimeout(10)
            silent.sendall(b"GET /hea")  # half a request line, then nothing
            assert silent.recv(1024) == b""  # closed by the server, not by our timeout
    finally:
        server.shutdown()
        server.server_close()


EMFILE_CHILD = textwrap.dedent(
    """
    import json, os, resource, socket, sys, time
    from http.server import BaseHTTPRequestHandler
    from tuner.daemon.http_server import BoundedServer
    server = BoundedServer("127.0.0.1", 0, BaseHTTPRequestHandler)
    client = socket.create_connection(server.server_address)  # waits in the backlog
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    waits = []
    for _ in range(6):
        started = time.monotonic()
        server._handle_request_noblock()  # what serve_forever does when the socket is readable
        waits.append(time.monotonic() - started)
    print(json.dumps({"waits": waits, "backoff": server._backoff_s}))
    """
)


def test_out_of_file_descriptors_the_accept_loop_backs_off_instead_of_spinning() -> None:
    """``accept`` failing with EMFILE (the listening socket stays readable): each failed
    accept waits twice as long as the last (5 ms, 10 ms, ... up to 1 s)."""
    done = subprocess.run(
        [sys.executable, "-c", EMFILE_CHILD],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["backoff"] == pytest.approx(0.16)
    assert sum(result["waits"]) >= 0.005 + 0.01 + 0.02 + 0.04 + 0.08 + 0.16


def test_the_cap_follows_a_low_file_descriptor_limit() -> None:
    assert 4 <= connection_cap() <= 64


def _run_with(tmp_path: Path, capsys: pytest.CaptureFixture[str], **daemon: object) -> str:
    config = kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9", {"token": "t"})
    settings = tmp_path / "settings.json"
    document = {"kubernetes": {"kubeconfig": str(config)}, "daemon": daemon}
    settings.write_text(json.dumps(document))
    assert main(["run", "--settings", str(settings)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tuner: error: "), lines
    return lines[0]


def test_a_metrics_port_in_use_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _run_with(tmp_path, capsys, metrics_port=port, metrics_host="127.0.0.1")
    assert (
        f"daemon.metrics_port: cannot listen on 127.0.0.1:{port} (Address already in use)" in line
    )


@pytest.mark.parametrize(
    ("host", "fragment"),
    [
        ("no-such-host.invalid", "daemon.metrics_host: 'no-such-host.invalid' cannot be resolved"),
        ("192.0.2.1", "daemon.metrics_host: cannot listen on 192.0.2.1:"),
    ],
)
def test_a_metrics_host_it_cannot_listen_on_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str, fragment: str
) -> None:
    assert fragment in _run_with(tmp_path, capsys, metrics_port=0, metrics_host=host)


def test_an_ipv6_metrics_host_is_served() -> None:
    server = Metrics(stale_after_s=1e9).serve(0, "::1")
    try:
        assert http_status(server.server_address[1], host="[::1]") == 200
    finally:
        server.shutdown()
        server.server_close()

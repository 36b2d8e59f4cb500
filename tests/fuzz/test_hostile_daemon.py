"""Hostile conditions for the daemon as a real process, each re-run as issue 28's probe ran
it: a signal before the cluster cache has synced (an API server that never answers),
2,000 slowloris connections to /metrics, and 506 idle connections under ``nofile=512``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.hostile import http_status, idle_connections, kubeconfig, silent_server
from tests.fuzz.harness import GENERATED
from tests.unit.test_metrics_server import served_fixture  # noqa: F401  (the fixture)
from tuner.daemon.http_server import BoundedServer

ROOT = Path(__file__).parents[2]


@pytest.fixture
def silent() -> Iterator[tuple[str, threading.Event]]:
    with silent_server() as server:
        yield server


@pytest.mark.parametrize(
    ("args", "number"),
    [(["--dry-run"], signal.SIGTERM), (["--once"], signal.SIGINT), (["--once"], signal.SIGTERM)],
)
def test_a_signal_before_the_cache_has_synced_ends_the_daemon_promptly(
    silent: tuple[str, threading.Event], tmp_path: Path, args: list[str], number: int
) -> None:
    GENERATED["signals"] += 1
    url, connected = silent
    config = kubeconfig(tmp_path / "kubeconfig", url, {"token": "t"})
    settings = tmp_path / "settings.json"
    document = {
        "kubernetes": {"kubeconfig": str(config)},
        "prometheus": {"url": "http://127.0.0.1:9", "timeout_s": 1},
        "load": {"query": "vector(1)"},
        "knowledge": {"path": str(tmp_path / "kb.sqlite")},
        "daemon": {"metrics_port": 0, "metrics_host": "127.0.0.1"},
    }
    settings.write_text(json.dumps(document))
    daemon = subprocess.Popen(
        [sys.executable, "-m", "tuner.cli", "run", "--settings", str(settings), *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert connected.wait(60), "the daemon never connected"  # its handlers are set by now
        daemon.send_signal(number)
        started = time.monotonic()
        status = daemon.wait(60)
        assert time.monotonic() - started < 20
        assert status == 0
        assert daemon.stderr is not None and "Traceback" not in daemon.stderr.read()
    finally:
        daemon.kill()
        daemon.wait()


def test_2000_idle_connections_hold_at_most_the_cap_and_healthz_answers(
    served: BoundedServer,
) -> None:
    GENERATED["http"] += 1
    port = served.server_address[1]
    idle = idle_connections(port, 2000)
    try:
        assert http_status(port) == 200
        assert served.open_connections <= served.cap <= 64
        # The oldest idle connections were closed by the server to make room.
        idle[0].settimeout(10)
        assert idle[0].recv(1) == b""
    finally:
        for connection in idle:
            connection.close()


NOFILE_CHILD = textwrap.dedent(
    """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))
    from tuner.daemon.metrics import Metrics
    server = Metrics(stale_after_s=1e9).serve(0, "127.0.0.1")
    print(server.server_address[1], server.cap, flush=True)
    sys.stdin.read()
    """
)


def _proc(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(field)


def test_with_nofile_512_506_idle_connections_leave_healthz_reachable() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", NOFILE_CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        port, cap = map(int, child.stdout.readline().split())
        assert cap == 64  # 512 // 8
        idle = idle_connections(port, 506)
        try:
            assert http_status(port) == 200
            assert len(os.listdir(f"/proc/{child.pid}/fd")) < 512 - 100
            assert _proc(child.pid, "Threads") <= cap + 8  # one thread per open connection
        finally:
            for connection in idle:
                connection.close()
        child.stdin.close()
        assert child.wait(30) == 0
    finally:
        child.kill()
        child.wait()

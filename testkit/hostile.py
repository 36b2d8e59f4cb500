"""Hostile peers for tests (not shipped): an API server that accepts and never answers, an
HTTP server that answers anything (what no real Prometheus sends), idle (slowloris)
connections, and a kubeconfig of a given server and user."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def kubeconfig(path: Path, server: str, user: dict[str, Any]) -> Path:
    """A kubeconfig at ``path`` with one cluster (``server``) and one ``user`` entry."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "a", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "a", "context": {"cluster": "a", "user": "u"}}],
                "current-context": "a",
            }
        )
    )
    return path


@contextlib.contextmanager
def silent_server() -> Iterator[tuple[str, threading.Event]]:
    """A server on loopback that accepts connections and never answers: its URL, and an event
    set once a connection came."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    connected = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)
            connected.set()

    threading.Thread(target=accept, daemon=True, name="silent-server").start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", connected
    finally:
        listener.close()
        for connection in held:
            connection.close()


def idle_connections(port: int, count: int, host: str = "127.0.0.1") -> list[socket.socket]:
    """``count`` connections to ``port`` that send nothing (slowloris)."""
    return [socket.create_connection((host, port), timeout=10) for _ in range(count)]


def http_status(port: int, path: str = "/healthz", host: str = "127.0.0.1") -> int:
    """The status of a GET of ``path`` (an error status raises)."""
    with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=10) as response:
        return int(response.status)


class RawAnswers(ThreadingHTTPServer):
    """Answers every GET with :attr:`status` and :attr:`body` (raw bytes, any JSON or none)."""

    status = 200
    body: bytes = b""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Raw)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Raw(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        assert isinstance(self.server, RawAnswers)
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@contextlib.contextmanager
def raw_answers() -> Iterator[RawAnswers]:
    """A :class:`RawAnswers` serving in a thread."""
    server = RawAnswers()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()

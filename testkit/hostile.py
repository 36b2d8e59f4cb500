"""Hostile peers for tests (not shipped): an API server that accepts and never answers, idle
(slowloris) connections, and a kubeconfig of a given server and user."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator
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

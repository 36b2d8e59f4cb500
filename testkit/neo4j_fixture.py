"""pytest plugin: a real, private Neo4j 5 server started through ``scripts/neo4j.sh``.

Enable it from ``tests/conftest.py``::

    pytest_plugins = ["testkit.neo4j_fixture"]

Fixtures:

``neo4j_server`` (session)
    Starts Neo4j on free loopback ports with a state directory under pytest's tmp dir (so
    parallel sessions and a developer's own server do not collide), yields a
    :class:`Neo4jServer`, and stops and wipes it at the end of the session.
``neo4j`` (function)
    The same server, (re)started if an earlier test stopped it, emptied of all data, with the
    password exported in ``TUNER_NEO4J_PASSWORD`` (the default ``knowledge.password_env``).

Tests using either fixture get the ``neo4j`` marker. When the server cannot be installed or
started (no Java or Maven) they are skipped, or fail when ``CI`` or ``TUNER_REQUIRE_NEO4J``
is set, so CI cannot go green by skipping them.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver, GraphDatabase

from knowledge.neo4j_store import Neo4jKnowledgeBase
from tuner.settings import Knowledge

from .scripts import run_script

__all__ = ["Neo4jServer", "neo4j", "neo4j_server"]

PASSWORD = "tuner-test-pw"
PASSWORD_ENV = "TUNER_NEO4J_PASSWORD"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Neo4jServer:
    """A private Neo4j server: its addresses, and control over its life for tests."""

    def __init__(self, state_dir: Path, env: dict[str, str] | None = None) -> None:
        self.env = env or {}
        """Extra environment for the script, e.g. ``NEO4J_HEAP``."""
        self.bolt_port = _free_port()
        self.http_port = _free_port()
        self.state_dir = state_dir
        self.user = "neo4j"
        self.password = PASSWORD
        self.database = "neo4j"
        self.uri = f"bolt://127.0.0.1:{self.bolt_port}"
        self.http = f"http://127.0.0.1:{self.http_port}"

    def _script(self, *args: str, timeout: float = 900.0) -> str:
        env = {
            **os.environ,
            "NEO4J_BOLT_PORT": str(self.bolt_port),
            "NEO4J_HTTP_PORT": str(self.http_port),
            "NEO4J_PASSWORD": self.password,
            "NEO4J_STATE_DIR": str(self.state_dir),
            **self.env,
        }
        return run_script("neo4j.sh", args, env, timeout)

    def start(self) -> None:
        """Start (or keep) the server; returns once Bolt and HTTP answer."""
        self._script("start")

    def stop(self, *, keep_data: bool = True) -> None:
        """Stop the server (clean shutdown); ``keep_data`` makes a later start a restart."""
        self._script("stop", *(["--keep"] if keep_data else []))

    def is_running(self) -> bool:
        """True when the server process of this state directory runs."""
        try:
            self._script("status", timeout=30)
        except RuntimeError:
            return False
        return True

    def driver(self) -> Driver:
        """A raw driver (for tests that write foreign data or inspect the graph)."""
        return GraphDatabase.driver(self.uri, auth=(self.user, self.password))

    def run(self, cypher: str, **params: Any) -> list[dict[str, Any]]:
        """Run one Cypher statement; its rows as dicts."""
        with self.driver() as driver:
            records, _, _ = driver.execute_query(cypher, params, database_=self.database)
        return [r.data() for r in records]

    def wipe(self) -> None:
        """Delete every vertex and edge (constraints and indexes stay)."""
        self.run("MATCH (n) DETACH DELETE n")

    def open(self, **options: Any) -> Neo4jKnowledgeBase:
        """A knowledge base on this server (options go to Neo4jKnowledgeBase)."""
        return Neo4jKnowledgeBase(self.uri, self.user, self.password, self.database, **options)

    def settings(self) -> Knowledge:
        """``knowledge`` settings that point at this server."""
        return Knowledge(
            backend="neo4j",
            uri=self.uri,
            user=self.user,
            database=self.database,
            password_env=PASSWORD_ENV,
        )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "neo4j: needs the real Neo4j server (scripts/neo4j.sh)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test using the Neo4j fixtures, so ``-m 'not neo4j'`` deselects them."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "neo4j" in names or "neo4j_server" in names or params.get("kb") == "neo4j":
            item.add_marker(pytest.mark.neo4j)


@pytest.fixture(scope="session")
def neo4j_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Neo4jServer]:
    """Session-wide Neo4j; stopped and wiped after the session."""
    server = Neo4jServer(tmp_path_factory.mktemp("neo4j"))
    try:
        server.start()
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        message = f"Neo4j could not be started (scripts/neo4j.sh install|start): {err}"
        if os.environ.get("CI") or os.environ.get("TUNER_REQUIRE_NEO4J"):
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield server
    finally:
        server.stop(keep_data=False)


@pytest.fixture
def neo4j(neo4j_server: Neo4jServer, monkeypatch: pytest.MonkeyPatch) -> Neo4jServer:
    """Per-test view: server running, graph empty, password exported."""
    if not neo4j_server.is_running():
        neo4j_server.start()
    neo4j_server.wipe()
    monkeypatch.setenv(PASSWORD_ENV, neo4j_server.password)
    return neo4j_server

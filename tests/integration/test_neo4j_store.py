"""The Neo4j backend on the real server: concurrent writers, outages, atomic writes.

Every test runs against the server that ``testkit.neo4j_fixture`` starts through
``scripts/neo4j.sh``; nothing is mocked.
"""

from __future__ import annotations

import logging
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from knowledge import neo4j_cypher
from knowledge.base import KnowledgeError, KnowledgeRefused
from knowledge.neo4j_store import Neo4jKnowledgeBase
from testkit.builders import cluster, node, pod
from testkit.neo4j_fixture import Neo4jServer
from tuner.analyse.options import Choice
from tuner.cycle import CycleState, Outcome, Ports, TransitionResult, run_cycle
from tuner.model.cluster import Cluster, Workload
from tuner.model.execution import Execution, NodeState, WorkloadType, by_name, execution_of
from tuner.model.load import Load
from tuner.model.movability import Policy, assess
from tuner.model.window_report import Verdict, WindowReport
from tuner.plan.actions import Action
from tuner.settings import Analyse, Pricing, Settings, Windows

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = [
    WorkloadType(
        Workload("shop", "Deployment", f"app-{i}"), 100 * (1 + i % 4), 2**28 * (1 + i % 3), True
    )
    for i in range(8)
] + [WorkloadType(Workload("shop", "StatefulSet", "db"), 1000, 2**32, False)]


def synthetic(id: str, seed: int, nodes: int = 3) -> Execution:
    """An execution whose nodes run random workloads of the shared pool (shared Pod vertices)."""
    rng = random.Random(seed)
    states, used = [], set()
    for n in range(nodes):
        picked = sorted(rng.sample(range(len(WORKLOADS)), 3))
        used.update(picked)
        pods = tuple(
            sorted(((WORKLOADS[w].workload, rng.randint(1, 3)) for w in picked), key=by_name)
        )
        states.append(NodeState(f"node-{n}", 4000, 16 * 2**30, "e2-standard-4", 0.134, pods))
    return Execution(
        id=id,
        start=1000.0 + seed,
        end=1600.0 + seed,
        load=100.0 + seed % 10,
        cost=round(0.134 * nodes, 3),
        cpu_ratio=rng.random(),
        nodes=tuple(states),
        workloads=tuple(WORKLOADS[w] for w in sorted(used)),
    )


def graph_counts(neo4j: Neo4jServer) -> dict[str, int]:
    (row,) = neo4j.run(
        "RETURN COUNT { (:Execution) } AS executions, COUNT { (:Node) } AS nodes, "
        "COUNT { (:Pod) } AS pods, COUNT { ()-[:HAS_NODE]->() } AS has_node, "
        "COUNT { ()-[:RAN]->() } AS ran"
    )
    return dict(row)


def _at_once(
    neo4j: Neo4jServer, tuner: Callable[[str, Neo4jKnowledgeBase], None], names: list[str]
) -> None:
    """Run ``tuner(name, store)`` for every name at once, each on its own thread and driver;
    re-raises the first failure."""
    start = threading.Barrier(len(names))
    errors: list[BaseException] = []

    def run(name: str) -> None:
        try:
            with neo4j.open() as kb:
                start.wait(timeout=30)
                tuner(name, kb)
        except BaseException as err:  # reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=run, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == []


def test_two_tuners_recording_at_once_lose_nothing(neo4j: Neo4jServer) -> None:
    """Two writers with their own drivers, overlapping ids and shared pod types."""
    common = [synthetic(f"common-{i}", 1000 + i) for i in range(15)]
    own = {
        name: [synthetic(f"{name}-{i}", seed + i) for i in range(40)]
        for name, seed in (("a", 0), ("b", 500))
    }

    def tuner(name: str, kb: Neo4jKnowledgeBase) -> None:
        mine = own[name] + common
        random.Random(name).shuffle(mine)
        for execution in mine:
            kb.record(execution)

    _at_once(neo4j, tuner, list(own))
    expected = {e.id: e for e in [*common, *own["a"], *own["b"]]}
    with neo4j.open() as kb:
        stored = {e.id: e for e in kb.list()}
    assert stored == expected
    counts = graph_counts(neo4j)
    nodes = sum(len(e.nodes) for e in expected.values())
    assert counts["nodes"] == counts["has_node"] == nodes
    assert counts["ran"] == sum(len(n.pods) for e in expected.values() for n in e.nodes)
    assert counts["pods"] == len({w for e in expected.values() for w in e.workloads})


def test_rerecording_an_id_with_another_deployment_is_refused_and_leaves_it(
    neo4j: Neo4jServer,
) -> None:
    first = synthetic("same", 1, nodes=4)
    second = replace(synthetic("same", 2, nodes=2), id="same")
    with neo4j.open() as kb:
        kb.record(first)
        with pytest.raises(KnowledgeRefused, match="execution 'same' is already stored"):
            kb.record(second)
        kb.record(first)
        assert kb.get("same") == first
    counts = graph_counts(neo4j)
    assert (counts["executions"], counts["nodes"], counts["has_node"]) == (1, 4, 4)


def test_a_foreign_vertex_under_a_recorded_id_is_refused(neo4j: Neo4jServer) -> None:
    """Another tool's (or a hand-edited) execution with that id cannot be read: it is not
    the same, so it is neither overwritten nor extended."""
    neo4j.run("CREATE (:Execution {id: 'same', load: 'lots'})")
    with neo4j.open() as kb, pytest.raises(KnowledgeRefused, match="unreadable"):
        kb.record(synthetic("same", 1))
    assert graph_counts(neo4j)["nodes"] == 0


def test_two_writers_of_one_id_one_content_each_store_one(neo4j: Neo4jServer) -> None:
    """Both look, find nothing, and create: the uniqueness constraint fails the later one,
    which looks again and is refused (another content) or finds the same (no-op)."""
    ids = [f"race-{i}" for i in range(30)]
    mine = {
        name: [replace(synthetic(i, seed), id=i) for i in ids]
        for name, seed in (("a", 1), ("b", 2))
    }
    refused: dict[str, int] = {}

    def tuner(name: str, kb: Neo4jKnowledgeBase) -> None:
        refused[name] = 0
        for execution in mine[name]:
            try:
                kb.record(execution)
            except KnowledgeRefused:
                refused[name] += 1

    _at_once(neo4j, tuner, list(mine))
    with neo4j.open() as kb:
        stored = {e.id: e for e in kb.list()}
    assert sorted(stored) == sorted(ids) and refused["a"] + refused["b"] == len(ids)
    assert all(stored[i] in (mine["a"][n], mine["b"][n]) for n, i in enumerate(ids))
    counts = graph_counts(neo4j)
    assert counts["nodes"] == counts["has_node"] == sum(len(e.nodes) for e in stored.values())


def test_a_failing_write_leaves_nothing_behind(
    neo4j: Neo4jServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last statement of the record transaction fails: the first two are rolled back."""
    old = synthetic("old", 3)
    with neo4j.open(retry_s=1.0) as kb:
        kb.record(old)
        before = graph_counts(neo4j)
        broken = neo4j_cypher.CREATE_NODES + "WITH count(*) AS done RETURN 1 / 0 AS boom"
        monkeypatch.setattr(neo4j_cypher, "CREATE_NODES", broken)
        new_pod = WorkloadType(Workload("other", "Deployment", "new"), 50, 2**20, True)
        fresh = replace(
            synthetic("fresh", 4),
            workloads=(*synthetic("fresh", 4).workloads, new_pod),
        )
        with pytest.raises(KnowledgeError, match="record failed") as failure:
            kb.record(fresh)
        assert "\n" not in str(failure.value)
        monkeypatch.undo()
        assert kb.get("fresh") is None
        assert kb.get("old") == old  # the earlier version is intact
    assert graph_counts(neo4j) == before
    assert neo4j.run("MATCH (p:Pod {workload: 'other/Deployment/new'}) RETURN p") == []


SLOW_WRITER = """
import sys
from knowledge import neo4j_cypher
from knowledge.neo4j_store import Neo4jKnowledgeBase
from tests.integration.test_neo4j_store import synthetic

# The nodes are written, then the transaction keeps the server busy until it is killed.
neo4j_cypher.CREATE_NODES += (
    "WITH count(*) AS done UNWIND range(1, 2000000000) AS i WITH i WHERE i < 0 RETURN count(i)"
)
uri, password = sys.argv[1], sys.argv[2]
with Neo4jKnowledgeBase(uri, "neo4j", password, query_timeout_s=600) as kb:
    kb.record_many([synthetic(f"half-{i}", i) for i in range(20)])
"""


def test_a_tuner_killed_mid_write_leaves_no_half_execution(neo4j: Neo4jServer) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, neo4j.uri, neo4j.password],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not _running_transactions(neo4j, "range(1, 2000000000)"):
            assert writer.poll() is None, "the writer ended before it was killed"
            assert time.monotonic() < deadline, "the write never started"
            time.sleep(0.2)
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        deadline = time.monotonic() + 120
        while _running_transactions(neo4j, "range(1, 2000000000)"):
            assert time.monotonic() < deadline, "the server kept the dead writer's transaction"
            time.sleep(0.2)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert graph_counts(neo4j) == {
        "executions": 0,
        "nodes": 0,
        "pods": 0,
        "has_node": 0,
        "ran": 0,
    }


def _running_transactions(neo4j: Neo4jServer, fragment: str) -> bool:
    rows = neo4j.run("SHOW TRANSACTIONS YIELD currentQuery RETURN currentQuery")
    return any(fragment in (row["currentQuery"] or "") for row in rows)


# --- an outage ---------------------------------------------------------------------------


@pytest.fixture
def restarts(neo4j: Neo4jServer) -> Iterator[Neo4jServer]:
    """The server, started again after the test whatever happened (other tests need it)."""
    try:
        yield neo4j
    finally:
        if not neo4j.is_running():
            neo4j.start()


def test_an_outage_is_one_clear_error_and_the_store_reconnects(restarts: Neo4jServer) -> None:
    neo4j = restarts
    kept = synthetic("kept", 6)
    with neo4j.open(retry_s=1.0, connect_timeout_s=1.0) as kb:
        kb.record(kept)
        neo4j.stop(keep_data=True)
        for attempt in (
            lambda: kb.find_by_load(100.0, 0.1),
            lambda: kb.record(synthetic("lost", 7)),
            lambda: kb.delete("kept"),
            kb.list,
        ):
            started = time.monotonic()
            with pytest.raises(KnowledgeError) as failure:
                attempt()
            assert time.monotonic() - started < 30
            message = str(failure.value)
            assert "\n" not in message
            assert neo4j.uri in message and "unreachable" in message, message
        with pytest.raises(KnowledgeError, match="connect failed") as opening:
            neo4j.open(retry_s=1.0, connect_timeout_s=1.0)
        assert "\n" not in str(opening.value)

        neo4j.start()
        assert kb.find_by_load(100.0, 0.1) == [kept]  # the same store, reconnected
        kb.record(synthetic("after", 8))
        assert {e.id for e in kb.list()} == {"kept", "after"}


# --- the tuner's cycle across an outage ----------------------------------------------------


class Stable:
    """A monitor that sees every window stable at load 100."""

    def observe(self, start: float, end: float) -> WindowReport:
        return WindowReport(
            Verdict.STABLE, "nothing changed", Load.scalar(100.0), start, end, start
        )


class Fixed:
    """Serves a fixed cluster; carrying out always succeeds."""

    def __init__(self, now: Cluster) -> None:
        self.cluster = now
        self.calls: list[tuple[Action, ...]] = []

    def read(self) -> Cluster:
        return self.cluster

    def check(self, actions: list[Action]) -> TransitionResult:
        return TransitionResult((), True, "dry run")

    def carry_out(self, actions: list[Action]) -> TransitionResult:
        self.calls.append(tuple(actions))
        return TransitionResult(tuple(actions), True)

    def reclaim_unremoved(self, now: float) -> tuple[str, ...]:
        return ()

    def take_back_needed(self, now: float) -> tuple[str, ...]:
        return ()


def test_the_cycle_keeps_running_through_an_outage_and_recovers(
    restarts: Neo4jServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Down: only the previous-deployment option is skipped. Back: it is found again."""
    neo4j = restarts
    settings = Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset(), candidate_delay_s=0, remove_nodes=False),
        windows=Windows(measure_s=600, retry_s=60, warmup_s=0),
    )
    then = cluster([node("x")], [pod("w-1", "x"), pod("w-2", "x")])
    cheaper = execution_of(then, assess(then, Policy(frozenset())), settings.pricing, 100.0, 0, 600)
    now = Fixed(cluster([node("x"), node("y")], [pod("w-1", "x"), pod("w-2", "y")]))
    with neo4j.open(retry_s=1.0, connect_timeout_s=1.0) as kb:
        kb.record(cheaper)
        ports = Ports(Stable(), now, kb)
        neo4j.stop(keep_data=True)
        with caplog.at_level(logging.WARNING):
            report, state = run_cycle(
                1000, CycleState(stable_since=0), settings, ports, random.Random(0)
            )
        assert report.outcome is Outcome.STAYED
        assert report.recorded is None
        assert "previous-deployment option skipped this window" in caplog.text
        assert "stable deployment not recorded" in caplog.text

        neo4j.start()
        report, state = run_cycle(1700, state, settings, ports, random.Random(0))
        assert report.outcome is Outcome.ACTED
        assert report.plan is not None and report.plan.analysis.decision is Choice.PREVIOUS
        assert state.awaiting == cheaper.id
        assert kb.get(cheaper.id) is None  # chosen: it returns once proved stable
        assert report.recorded is not None and kb.get(report.recorded) is not None


def test_a_read_only_store_refuses_writes(neo4j: Neo4jServer) -> None:
    with neo4j.open() as kb:
        kb.record(synthetic("a", 9))
    with Neo4jKnowledgeBase(neo4j.uri, neo4j.user, neo4j.password, read_only=True) as kb:
        assert [e.id for e in kb.list()] == ["a"]
        for attempt in (
            lambda: kb.record(synthetic("b", 10)),
            lambda: kb.delete("a"),
            lambda: kb.prune(keep=0),
        ):
            with pytest.raises(KnowledgeError, match="read-only"):
                attempt()
    assert graph_counts(neo4j)["executions"] == 1


def test_a_wrong_password_is_named(neo4j: Neo4jServer) -> None:
    with pytest.raises(KnowledgeError, match="authentication failed") as failure:
        Neo4jKnowledgeBase(neo4j.uri, neo4j.user, "not-the-password", retry_s=1.0)
    message = str(failure.value)
    assert "\n" not in message and message.startswith(f"Neo4j at {neo4j.uri}")


def test_browser_captions_are_written_and_filled_in_for_older_graphs(neo4j: Neo4jServer) -> None:
    """Captions (Neo4j Browser only) come with every record; executions recorded before them
    get theirs when a tuner opens the graph read-write, never read-only."""
    with neo4j.open() as kb:
        kb.record(synthetic("new", 1))
        kb.record(synthetic("old", 2, nodes=2))
    neo4j.run("MATCH (e:Execution {id: 'old'})-[:HAS_NODE]->(n) REMOVE e.caption, n.caption")
    captions = (
        "MATCH (e:Execution)-[:HAS_NODE]->(n) RETURN e.id AS id, e.caption AS e, n.caption AS n"
    )
    with neo4j.open(read_only=True):
        assert {r["id"]: r["e"] for r in neo4j.run(captions)}["old"] is None
    with neo4j.open() as kb:
        assert kb.get("old") == synthetic("old", 2, nodes=2)  # captions are never read back
    rows = neo4j.run(captions + " ORDER BY id, n")
    assert {(r["id"], r["e"]) for r in rows} == {
        ("new", "load 101 cost 0.4020/h"),
        ("old", "load 102 cost 0.2680/h"),
    }
    assert [r["n"] for r in rows if r["id"] == "old"] == ["node-0", "node-1"]

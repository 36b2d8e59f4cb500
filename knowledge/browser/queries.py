"""Ready Cypher queries for exploring the knowledge graph in Neo4j Browser.

Each is one line (Browser's editor runs it as typed) with the values filled in, so it can be
pasted as is. The graph queries return paths. Many executions are drawn as flowers (each
execution with its nodes); one execution as the onion (its nodes around the pod types they
ran), since pod types shared by several executions tie them into a hairball; the executions
that ran one workload around that workload.
"""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.base import load_band

ONION = "MATCH p = (e)-[:HAS_NODE]->(:Node)-[:RAN]->(:Pod) RETURN p"
"""Executions (outside), their nodes and the pod types they ran (the core), drawn as paths."""
FLOWER = "MATCH p = (e)-[:HAS_NODE]->(:Node) RETURN p"
"""Executions with their nodes only: one flower per execution, however many there are."""


@dataclass(frozen=True)
class Query:
    """A titled Cypher query."""

    title: str
    cypher: str


def _quoted(text: str) -> str:
    """``text`` as a Cypher string literal that stays on one line and cannot end early:
    backslashes and quotes escaped, every character that is not printable (a newline, a line
    separator, a control character) as a ``\\uXXXX`` (or ``\\UXXXXXXXX``) escape."""
    return "'" + "".join(_escaped(c) for c in text) + "'"


def _escaped(char: str) -> str:
    if char in "\\'\"":
        return "\\" + char
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def history_query(load: float, delta: float, limit: int = 10) -> str:
    """The deployment history for a load band, newest first: each execution with its nodes
    (no pod types, so that any number of executions stays readable)."""
    low, high = load_band(load, delta)
    return (
        f"MATCH (e:Execution) WHERE {low!r} <= e.load <= {high!r} "
        f"WITH e ORDER BY e.end DESC LIMIT {limit} {FLOWER}"
    )


def deployment_query(load: float, delta: float) -> str:
    """The cheapest deployment recorded for a load band (the one the analyse step would try
    first): one execution, its nodes and what ran on them."""
    low, high = load_band(load, delta)
    return (
        f"MATCH (e:Execution) WHERE {low!r} <= e.load <= {high!r} "
        f"WITH e ORDER BY e.cost, e.cpu_ratio, e.id LIMIT 1 {ONION}"
    )


def ready_queries(load: float, delta: float, workload: str) -> list[Query]:
    """The queries ``tuner kb browse`` prints, for a load band and one workload."""
    low, high = load_band(load, delta)
    band = f"load {load:g} ± {delta:.0%}"
    return [
        Query(
            "Latest executions and their nodes",
            f"MATCH (e:Execution) WITH e ORDER BY e.end DESC LIMIT 5 {FLOWER}",
        ),
        Query(f"Deployment history for {band}", history_query(load, delta)),
        Query(
            f"The cheapest deployment for {band}: its nodes and the workloads they ran",
            deployment_query(load, delta),
        ),
        Query(
            "What the analyse step chooses from for that load: cheapest first, ties by CPU ratio",
            f"MATCH (e:Execution) WHERE {low!r} <= e.load <= {high!r} "
            "RETURN e.id AS id, e.load AS load, e.cost AS cost_per_hour, "
            "e.cpu_ratio AS cpu_ratio, COUNT { (e)-[:HAS_NODE]->() } AS nodes "
            "ORDER BY cost_per_hour, cpu_ratio, id",
        ),
        Query(
            "Cost over time",
            "MATCH (e:Execution) RETURN datetime({epochMillis: toInteger(e.end * 1000)}) AS ended,"
            " e.load AS load, e.cost AS cost_per_hour, e.cpu_ratio AS cpu_ratio ORDER BY ended",
        ),
        Query(
            f"The latest executions that ran {_quoted(workload)}, around it",
            f"MATCH (e:Execution)-[:HAS_NODE]->(:Node)-[:RAN]->(w:Pod) "
            f"WHERE w.workload = {_quoted(workload)} "
            "WITH DISTINCT e, w ORDER BY e.end DESC LIMIT 10 "
            "MATCH p = (e)-[:HAS_NODE]->(:Node)-[:RAN]->(w) RETURN p",
        ),
    ]

"""Ready Cypher queries for exploring the knowledge graph in Neo4j Browser.

Each is one line (Browser's editor runs it as typed) with the values filled in, so it can be
pasted as is. The graph queries return paths: Browser draws them as the onion, executions
outside, node states around the shared pod types.
"""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.base import load_band

ONION = "MATCH p = (e)-[:HAS_NODE]->(:Node)-[:RAN]->(:Pod) RETURN p"


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


def history_query(load: float, delta: float, limit: int = 25) -> str:
    """The deployment history for a load band, newest first (drawn as a graph)."""
    low, high = load_band(load, delta)
    return (
        f"MATCH (e:Execution) WHERE {low!r} <= e.load <= {high!r} "
        f"WITH e ORDER BY e.end DESC LIMIT {limit} {ONION}"
    )


def ready_queries(load: float, delta: float, workload: str) -> list[Query]:
    """The queries ``tuner kb browse`` prints, for a load band and one workload."""
    low, high = load_band(load, delta)
    return [
        Query(
            "Latest executions",
            f"MATCH (e:Execution) WITH e ORDER BY e.end DESC LIMIT 5 {ONION}",
        ),
        Query(
            f"Deployment history for load {load:g} ± {delta:.0%}",
            history_query(load, delta),
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
            f"Executions that ran {_quoted(workload)}",
            f"MATCH p = (e:Execution)-[:HAS_NODE]->(:Node)-[:RAN]->(w:Pod) "
            f"WHERE w.workload = {_quoted(workload)} RETURN p",
        ),
    ]

"""How an execution maps onto the graph, and the Cypher that writes and reads it.

The thesis' onion (pod types in the core, node states around them, executions outside)::

    (:Execution {id, start, end, load, cost, cpu_ratio[, load_keys, load_values], caption})
        -[:HAS_NODE {position}]->(:Node {name, cpu, memory, type, price, caption})
        -[:RAN {count}]->(:Pod {key, workload, namespace, kind, name, cpu, memory, movable})

- An Execution owns its Node vertices (one per node of that deployment; ``position`` keeps
  the node order). Deleting an execution deletes them, never the Pod vertices.
- A Pod vertex is a *workload type*: a workload at given requests and movability, shared by
  every execution that ran it (MERGE on ``key``). A workload whose requests change gets a
  second Pod vertex, so old executions keep describing what really ran.
- Times are epoch seconds, CPU millicores, memory bytes, prices per hour: the units of
  :mod:`tuner.model.execution`.
- ``caption`` (Execution and Node) is for Neo4j Browser only, never read back
  (:mod:`knowledge.browser.captions`); graphs recorded before it get theirs when a tuner
  opens them read-write (:data:`MISSING_CAPTIONS`).

An execution of a load vector also holds its dimensions as two parallel list properties,
``load_keys`` (the monitor's label sets, e.g. ``{service="web"}``, sorted) and
``load_values``; ``load`` is their total. An execution of a scalar load (and every one
recorded before vectors were kept) has neither and served ``{"": load}``. A lookup for a
vector seeks the band of its total on the ``Execution.load`` index as before (the same load
in every dimension implies the same total), then keeps the executions that served it in
every dimension, before the sort and the limit.
"""

from __future__ import annotations

from typing import Any

from knowledge.browser.captions import execution_caption, node_captions
from tuner.model.execution import Execution, WorkloadType
from tuner.model.load import TOLERANCE


def pod_key(workload: WorkloadType) -> str:
    """Identity of a Pod vertex: the workload and everything that describes its pods."""
    mobility = "movable" if workload.movable else "fixed"
    return f"{workload.workload}|cpu={workload.cpu}|memory={workload.memory}|{mobility}"


def _pod_properties(workload: WorkloadType) -> dict[str, Any]:
    ref = workload.workload
    return {
        "key": pod_key(workload),
        "workload": str(ref),
        "namespace": ref.namespace,
        "kind": ref.kind,
        "name": ref.name,
        "cpu": workload.cpu,
        "memory": workload.memory,
        "movable": workload.movable,
    }


def encode(execution: Execution) -> dict[str, Any]:
    """Query parameters for one execution: its properties, nodes and the pod types they ran.

    Raises ValueError when a node runs a workload that the execution does not describe.
    """
    keys = {w.workload: pod_key(w) for w in execution.workloads}
    captions = node_captions([node.name for node in execution.nodes])
    nodes = []
    for position, node in enumerate(execution.nodes):
        missing = [w for w, _ in node.pods if w not in keys]
        if missing:
            raise ValueError(
                f"execution {execution.id}: node {node.name} runs {missing[0]}, "
                "which is not among its workload types"
            )
        nodes.append(
            {
                "position": position,
                "props": {
                    "name": node.name,
                    "cpu": node.cpu,
                    "memory": node.memory,
                    "type": node.instance_type,
                    "price": node.price,
                    "caption": captions[position],
                },
                "pods": [{"key": keys[w], "count": count} for w, count in node.pods],
            }
        )
    vector = (
        {
            "load_keys": [k for k, _ in execution.load_vector],
            "load_values": [v for _, v in execution.load_vector],
        }
        if execution.load_vector
        else {}
    )
    return {
        "id": execution.id,
        "props": {
            "id": execution.id,
            "start": execution.start,
            "end": execution.end,
            "load": execution.load,
            "cost": execution.cost,
            "cpu_ratio": execution.cpu_ratio,
            **vector,
            "caption": execution_caption(execution.load, execution.cost),
        },
        "nodes": nodes,
        "pods": [_pod_properties(w) for w in execution.workloads],
    }


# --- writes: one transaction reads what is stored, then runs all three for the rest ----

CREATE_EXECUTIONS = """
UNWIND $executions AS x
CREATE (e:Execution)
SET e = x.props
"""
"""The execution vertices of a batch none of which is stored yet (an id stored since makes the
uniqueness constraint fail the transaction)."""

MERGE_PODS = """
UNWIND $pods AS pod
MERGE (p:Pod {key: pod.key})
ON CREATE SET p = pod
"""
"""The shared workload types; ``$pods`` is sorted by key so concurrent writers lock in order."""

CREATE_NODES = """
UNWIND $executions AS x
MATCH (e:Execution {id: x.id})
UNWIND x.nodes AS node
CREATE (e)-[:HAS_NODE {position: node.position}]->(n:Node)
SET n = node.props
WITH n, node
UNWIND node.pods AS ran
MATCH (p:Pod {key: ran.key})
CREATE (n)-[:RAN {count: ran.count}]->(p)
"""

DELETE_EXECUTIONS = """
UNWIND $ids AS id
MATCH (e:Execution {id: id})
CALL {
  WITH e
  MATCH (e)-[:HAS_NODE]->(n:Node)
  WHERE NOT EXISTS { MATCH (n)<-[:HAS_NODE]-(other:Execution) WHERE other <> e }
  DETACH DELETE n
}
DETACH DELETE e
RETURN count(*) AS deleted
"""
"""Executions and their own Node vertices; Pod vertices stay (other executions share them)."""

DELETE_ORPHAN_PODS = """
MATCH (p:Pod)
WHERE NOT EXISTS { MATCH (p)<-[:RAN]-() }
DETACH DELETE p
RETURN count(*) AS deleted
"""

# --- reads ----------------------------------------------------------------------------

_DEPLOYMENT = """
RETURN properties(e) AS execution,
       [(e)-[h:HAS_NODE]->(n:Node) |
          [h.position, n.name, n.cpu, n.memory, n.type, n.price,
           [(n)-[r:RAN]->(p:Pod) | [elementId(p), r.count]]]] AS nodes
"""
"""One row per execution: its properties and its nodes as compact lists,
``[position, name, cpu, memory, type, price, [[pod element id, count], ...]]``.

Each node refers to its pod types by element id; :data:`PODS` then fetches every referenced
type once, in the same transaction. A band of 50 executions of 20 nodes shares a few dozen
pod types: sent with every RAN edge as maps, they were most of the bytes and most of the
time of a lookup.
"""

_SERVED = """
WITH e, coalesce(e.load_keys, ['']) AS dims, coalesce(e.load_values, [e.load]) AS rates
WHERE $vector IS NULL OR CASE
  WHEN (e.load_keys IS NULL) = (e.load_values IS NULL)
   AND dims IS :: LIST<STRING NOT NULL>
   AND (rates IS :: LIST<FLOAT NOT NULL> OR rates IS :: LIST<INTEGER NOT NULL>)
   AND size(dims) = size(rates) AND size(dims) > 0
   AND all(rate IN rates WHERE 0 <= rate <= 1.7976931348623157e308)
   AND all(i IN range(0, size(dims) - 1) WHERE NOT dims[i] IN dims[i + 1..])
  THEN all(i IN range(0, size(dims) - 1) WHERE
           abs(rates[i] - coalesce($vector[dims[i]], 0.0))
           <= $delta * coalesce($vector[dims[i]], 0.0) * $slack)
   AND all(k IN keys($vector) WHERE
           k IN dims OR abs(0.0 - $vector[k]) <= $delta * $vector[k] * $slack)
  ELSE true
END
"""
"""Given ``$vector`` (dimension -> load), the executions that served it within ``$delta``
in every dimension, a dimension one side lacks being 0 there: the predicate of
:func:`tuner.model.load.dimensions_outside`, term for term (``$slack`` is its
``1 + TOLERANCE``). An execution without ``load_keys``/``load_values`` served
``{"": load}``. Malformed ones pass, so that reading them skips them with a warning."""

FIND_BY_LOAD = (
    "MATCH (e:Execution) WHERE e.load >= $low AND e.load <= $high\n"
    "  AND ($cheaper_than IS NULL OR e.cost < $cheaper_than)"
    + _SERVED
    + "WITH e ORDER BY e.cost, e.cpu_ratio, e.id LIMIT $limit"
    + _DEPLOYMENT
)
"""The analyse step's lookup: a range seek on the ``Execution.load`` index, the cost and load
vector filters and a top-``$limit`` sort on the executions' own properties, and only then the
deployments of the few that are left (reading and sending those is what a lookup spends its
time on)."""

SLACK = 1 + TOLERANCE
"""``$slack`` of :data:`FIND_BY_LOAD`."""

GET = "MATCH (e:Execution {id: $id})" + _DEPLOYMENT

STORED = "MATCH (e:Execution) WHERE e.id IN $ids" + _DEPLOYMENT
"""The executions a batch to record names that are stored already (an index seek)."""

LIST = "MATCH (e:Execution) WITH e ORDER BY e.end DESC, e.id LIMIT $limit" + _DEPLOYMENT

COUNT = "MATCH (e:Execution) RETURN count(e) AS n"

PODS = """
MATCH (p:Pod) WHERE elementId(p) IN $refs
RETURN elementId(p) AS ref, properties(p) AS pod
"""
"""The pod types a read's rows refer to, by element id (an id seek)."""

IDS_ENDED_BEFORE = """
MATCH (e:Execution) WHERE e.end < $before
RETURN e.id AS id LIMIT $batch
"""

IDS_BEYOND_NEWEST = """
MATCH (e:Execution)
WITH e ORDER BY e.end DESC, e.id SKIP $keep
RETURN e.id AS id LIMIT $batch
"""

CONNECTORS = """
SHOW SETTINGS YIELD name, value
WHERE name IN ['server.http.enabled', 'server.http.advertised_address',
               'server.https.enabled', 'server.https.advertised_address']
RETURN name, value
"""
"""The server's HTTP(S) connectors, which serve Neo4j Browser (needs the privilege to read
settings, which the admin user has)."""

MISSING_CAPTIONS = """
MATCH (e:Execution) WHERE e.caption IS NULL
WITH e LIMIT $batch
RETURN elementId(e) AS ref, e.load AS load, e.cost AS cost,
       [(e)-[:HAS_NODE]->(n:Node) | [elementId(n), n.name]] AS nodes
"""
"""A batch of executions recorded without captions (before they were written)."""

SET_CAPTIONS = """
UNWIND $executions AS x
MATCH (e:Execution) WHERE elementId(e) = x.ref
SET e.caption = x.caption
WITH x
UNWIND x.nodes AS node
MATCH (n:Node) WHERE elementId(n) = node.ref
SET n.caption = node.caption
"""

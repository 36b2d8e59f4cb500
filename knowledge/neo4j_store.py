"""The Neo4j backend: every stable deployment as an onion-shaped graph (see neo4j_cypher).

Each call is one managed transaction through the official driver: a write either stores a
whole execution or nothing, and transient failures (deadlocks between concurrent writers, a
leader switch, a dropped connection) are retried by the driver for up to ``retry_s``
seconds. Whatever still fails is a :class:`~knowledge.base.KnowledgeError` naming the server.
The driver reconnects by itself once the server is back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any, LiteralString
from urllib.parse import urlsplit

import neo4j
from neo4j import Driver, GraphDatabase, ManagedTransaction
from neo4j.exceptions import ConstraintError

from knowledge import neo4j_account as account
from knowledge import neo4j_cypher as cypher
from knowledge.base import (
    Closing,
    KnowledgeError,
    ShadowCycles,
    check_same,
    decode_shadow,
    distinct,
    load_band,
    row_limit,
)
from knowledge.browser.captions import execution_caption, node_captions
from knowledge.neo4j_decode import Malformed, decode, decode_rows, pod_refs, pod_types
from knowledge.neo4j_errors import translated
from knowledge.neo4j_schema import ensure_schema
from tuner.model.account import ShadowCycle
from tuner.model.execution import Execution
from tuner.redact import redact_url

log = logging.getLogger(__name__)
Executions = list[Execution]
Ids = list[str]
Rows = list[dict[str, Any]]
PRUNE_BATCH = 1000
"""Executions deleted (or given captions) per transaction: keeps transactions small."""


class Neo4jKnowledgeBase(Closing):
    """Executions in a Neo4j 5 database over Bolt."""

    def __init__(
        self,
        uri: str,
        user: str,
        password: str,
        database: str = "neo4j",
        *,
        read_only: bool = False,
        retry_s: float = 10.0,
        connect_timeout_s: float = 5.0,
        query_timeout_s: float = 60.0,
    ) -> None:
        """Connect, check the schema version and (unless ``read_only``) migrate the schema.

        Raises KnowledgeError when the server cannot be reached or holds a newer schema.
        """
        self.server = f"Neo4j at {redact_url(uri)} (database {database})"
        host = urlsplit(uri).hostname or "127.0.0.1"
        self._host = f"[{host}]" if ":" in host else host
        self._database = database
        self._read_only = read_only
        self._timeout = query_timeout_s
        with translated(self.server, "connect"):
            self._driver: Driver = GraphDatabase.driver(
                uri,
                auth=(user, password),
                connection_timeout=connect_timeout_s,
                connection_acquisition_timeout=connect_timeout_s + retry_s,
                max_transaction_retry_time=retry_s,
                notifications_min_severity="OFF",
                user_agent="k8s-deployment-tuner",
            )
        try:
            with translated(self.server, "connect"):
                self._driver.verify_connectivity()
                self.schema_version = ensure_schema(
                    self._driver, database, self.server, read_only=read_only
                )
                if not read_only:
                    self._fill_captions()
        except KnowledgeError:
            self._driver.close()
            raise

    # --- the KnowledgeBase protocol -------------------------------------------------

    def record(self, execution: Execution) -> None:
        """Store an execution in one transaction; recording it again changes nothing."""
        self.record_many([execution])

    def record_many(self, executions: Iterable[Execution]) -> None:
        """Store a batch of executions in one transaction (bulk loads, imports). One already
        stored must be the same (it is left as it is); another content under a stored id is
        refused (KnowledgeRefused) and nothing is written."""
        self._refuse_if_read_only("record")
        batch = distinct(executions)
        try:
            encoded = {e.id: cypher.encode(e) for e in batch.values()}
        except ValueError as err:
            raise KnowledgeError(f"{self.server}: record refused: {err}") from err
        if not encoded:
            return

        def write(tx: ManagedTransaction) -> None:
            rows, pods = _fetch(tx, cypher.STORED, {"ids": list(encoded)})
            types = pod_types(pods)
            stored = set()
            for row in rows:
                execution_id = row["execution"]["id"]
                try:
                    found: Execution | ValueError = decode(row["execution"], row["nodes"], types)
                except Malformed as err:
                    found = err
                check_same(found, batch[execution_id])
                stored.add(execution_id)
            fresh = [x for key, x in encoded.items() if key not in stored]
            if fresh:
                _create(tx, fresh)

        # A writer that stored one of these ids after this one looked makes the uniqueness
        # constraint fail the transaction; the second look finds it stored.
        try:
            self._write("record", write)
        except KnowledgeError as err:
            if not isinstance(err.__cause__, ConstraintError):
                raise
            self._write("record", write)

    def find_by_load(
        self,
        load: float,
        delta: float,
        *,
        cheaper_than: float | None = None,
        limit: int | None = None,
        vector: Mapping[str, float] | None = None,
    ) -> Executions:
        """Executions with load in ``load*(1±delta)`` (cheaper than ``cheaper_than``; given
        ``vector``, the same load per dimension), cheapest first, ties by cpu_ratio; the
        server filters, sorts and reads only the first ``limit`` in full."""
        low, high = load_band(load, delta)
        return self._read(
            "find_by_load",
            cypher.FIND_BY_LOAD,
            low=low,
            high=high,
            cheaper_than=cheaper_than,
            limit=row_limit(limit),
            vector=None if vector is None else dict(vector),
            delta=delta,
            slack=cypher.SLACK,
        )

    def get(self, execution_id: str) -> Execution | None:
        """One execution with its full deployment, or None."""
        found = self._read("get", cypher.GET, id=execution_id)
        return found[0] if found else None

    def delete(self, execution_id: str) -> bool:
        """Remove an execution and its Node vertices (never the shared Pod vertices)."""
        return self._delete([execution_id]) > 0

    def list(self, limit: int | None = None) -> Executions:
        """Executions, newest (by end of window) first."""
        return self._read("list", cypher.LIST, limit=row_limit(limit))

    def count(self) -> int:
        """One aggregate over the Execution label's count store."""

        def read(tx: ManagedTransaction) -> int:
            return int(tx.run(cypher.COUNT).single(strict=True)["n"])

        with translated(self.server, "count"), self._session() as session:
            return int(session.execute_read(neo4j.unit_of_work(timeout=self._timeout)(read)))

    def prune(self, *, older_than: float | None = None, keep: int | None = None) -> int:
        """Delete executions that ended before ``older_than``, then all but the newest
        ``keep``, in transactions of :data:`PRUNE_BATCH` executions."""
        removed = 0
        if older_than is not None:
            removed += self._delete_while(cypher.IDS_ENDED_BEFORE, before=older_than)
        if keep is not None:
            removed += self._delete_while(cypher.IDS_BEYOND_NEWEST, keep=keep)
        return removed

    def remove_orphan_pods(self) -> int:
        """Delete Pod vertices no execution uses any more; returns how many.

        Not part of :meth:`delete`: a tuner recording at the same moment may be about to
        reuse such a vertex (its write would then fail and be retried next window).
        """
        self._refuse_if_read_only("remove_orphan_pods")

        def sweep(tx: ManagedTransaction) -> int:
            return int(tx.run(cypher.DELETE_ORPHAN_PODS).single(strict=True)["deleted"])

        return int(self._write("remove_orphan_pods", sweep))

    def record_shadow(self, cycle: ShadowCycle) -> None:
        """Add a cycle to the shadow account in one transaction (idempotent by id)."""
        self._refuse_if_read_only("record_shadow")
        props = account.properties(cycle)

        def write(tx: ManagedTransaction) -> None:
            tx.run(account.RECORD, id=cycle.id, props=props).consume()

        self._write("record_shadow", write)

    def shadow_cycles(self, since: float, until: float) -> ShadowCycles:
        """The account's cycles in ``[since, until]``, oldest first."""

        def read(tx: ManagedTransaction) -> list[tuple[str, str]]:
            found = tx.run(account.PERIOD, since=since, until=until)
            return [(record["id"], record["body"]) for record in found]

        with translated(self.server, "shadow_cycles"), self._session() as session:
            rows = session.execute_read(neo4j.unit_of_work(timeout=self._timeout)(read))
        return list(decode_shadow(rows))

    def browser_address(self) -> str | None:
        """The base URL of Neo4j Browser on this server: the scheme and port of the HTTP (or
        else HTTPS) connector the server advertises, at the host the tuner reaches it by. None
        when the server does not say (no such connector, or a user who may not read the
        server's settings, as on Aura)."""

        def read(tx: ManagedTransaction) -> dict[str, Any]:
            return {row["name"]: row["value"] for row in tx.run(cypher.CONNECTORS)}

        try:
            with translated(self.server, "read settings"), self._session() as session:
                connectors = session.execute_read(read)
        except KnowledgeError as err:
            log.debug("Neo4j Browser's address unknown: %s", err)
            return None
        for scheme in ("http", "https"):
            port = str(connectors.get(f"server.{scheme}.advertised_address", "")).rpartition(":")
            if connectors.get(f"server.{scheme}.enabled") in (True, "true") and port[2].isdigit():
                return f"{scheme}://{self._host}:{port[2]}"
        return None

    def close(self) -> None:
        """Close the driver and its connections."""
        self._driver.close()

    # --- plumbing -------------------------------------------------------------------

    def _refuse_if_read_only(self, action: str) -> None:
        if self._read_only:
            raise KnowledgeError(f"{self.server}: {action} refused: opened read-only")

    def _fill_captions(self) -> None:
        """Write the Browser captions of executions recorded before captions were. A graph
        that has them all costs one read (a scan of the Execution vertices) and no write."""

        def missing(tx: ManagedTransaction) -> list[dict[str, Any]]:
            executions = []
            for row in tx.run(cypher.MISSING_CAPTIONS, batch=PRUNE_BATCH):
                captions = node_captions([name for _, name in row["nodes"]])
                nodes = [
                    {"ref": ref, "caption": caption}
                    for (ref, _), caption in zip(row["nodes"], captions, strict=True)
                ]
                caption = execution_caption(row["load"], row["cost"])
                executions.append({"ref": row["ref"], "caption": caption, "nodes": nodes})
            return executions

        while True:
            with translated(self.server, "read captions"), self._session() as session:
                executions = session.execute_read(missing)
            if not executions:
                return
            self._write("write captions", partial(_set_captions, executions=executions))

    def _delete(self, ids: Ids) -> int:
        self._refuse_if_read_only("delete")

        def delete(tx: ManagedTransaction) -> int:
            row = tx.run(cypher.DELETE_EXECUTIONS, ids=ids).single(strict=True)
            return int(row["deleted"])

        return int(self._write("delete", delete))

    def _delete_while(self, select: LiteralString, **params: Any) -> int:
        removed = 0
        while True:
            with translated(self.server, "prune"), self._session() as session:
                ids = session.execute_read(
                    lambda tx: [r["id"] for r in tx.run(select, params, batch=PRUNE_BATCH)]
                )
            if not ids:
                return removed
            removed += self._delete(ids)

    def _session(self) -> neo4j.Session:
        mode = neo4j.READ_ACCESS if self._read_only else neo4j.WRITE_ACCESS
        return self._driver.session(database=self._database, default_access_mode=mode)

    def _write(self, action: str, work: Any) -> Any:
        with translated(self.server, action), self._session() as session:
            return session.execute_write(neo4j.unit_of_work(timeout=self._timeout)(work))

    def _read(self, action: str, query: LiteralString, **params: Any) -> Executions:
        def read(tx: ManagedTransaction) -> tuple[Rows, dict[str, dict[str, Any]]]:
            return _fetch(tx, query, params)

        with translated(self.server, action), self._session() as session:
            rows, pods = session.execute_read(neo4j.unit_of_work(timeout=self._timeout)(read))
        return decode_rows(rows, pods, self.server)


def _fetch(
    tx: ManagedTransaction, query: LiteralString, params: dict[str, Any]
) -> tuple[Rows, dict[str, dict[str, Any]]]:
    """The rows of a read (keys ``execution``, ``nodes``) and the pod types they refer to."""
    # Not record.data(): it copies every nested value again, a third of a lookup.
    rows = [
        {"execution": record["execution"], "nodes": record["nodes"]}
        for record in tx.run(query, params)
    ]
    if not rows:
        return rows, {}
    found = tx.run(cypher.PODS, refs=pod_refs(rows))
    return rows, {record["ref"]: record["pod"] for record in found}


def _set_captions(tx: ManagedTransaction, executions: list[dict[str, Any]]) -> None:
    tx.run(cypher.SET_CAPTIONS, executions=executions).consume()


def _create(tx: ManagedTransaction, encoded: list[dict[str, Any]]) -> None:
    """Write executions none of which is stored yet, with their nodes and pod types."""
    pods = {pod["key"]: pod for x in encoded for pod in x["pods"]}
    # Each statement gets only what it reads: the driver packs parameters in Python, and
    # packing the whole batch for all three was half the time of a bulk load.
    vertices = [{"id": x["id"], "props": x["props"]} for x in encoded]
    deployments = [{"id": x["id"], "nodes": x["nodes"]} for x in encoded]
    tx.run(cypher.CREATE_EXECUTIONS, executions=vertices).consume()
    tx.run(cypher.MERGE_PODS, pods=[pods[key] for key in sorted(pods)]).consume()
    tx.run(cypher.CREATE_NODES, executions=deployments).consume()

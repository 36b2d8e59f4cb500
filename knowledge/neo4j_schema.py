"""The Neo4j graph's schema: constraints, indexes, and its version with migrations.

The version lives in one ``(:TunerSchema {id: 'tuner', version: N})`` vertex. On start a
read-write tuner runs every migration from the stored version up to :data:`SCHEMA_VERSION`
(each is idempotent), then records the new version; a graph with a *newer* version is refused,
so an old tuner never writes into a layout it does not understand. A read-only tuner only
checks the version. A later release adds its step to :data:`MIGRATIONS` and raises
SCHEMA_VERSION. Optional properties read only after the index seek need none: the load
vector (``Execution.load_keys``, ``load_values``, see :mod:`knowledge.neo4j_cypher`) came
without a version, since executions without it are scalar loads.

Version 1:

- ``tuner_execution_id``: ``Execution.id`` is unique (ids are content hashes; MERGE on it);
- ``tuner_pod_key``: ``Pod.key`` is unique (one vertex per workload type, shared by executions);
- ``tuner_schema_id``: one TunerSchema vertex;
- range indexes on ``Execution.load`` (the load-band lookup), ``Execution.end`` (list, prune)
  and ``Pod.workload`` ("which executions did this workload run in").

Version 2: the shadow account (:mod:`knowledge.neo4j_account`): ``tuner_shadow_id`` makes
``ShadowCycle.id`` unique, ``tuner_shadow_at`` indexes ``ShadowCycle.at`` (a period's cycles).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neo4j import Driver, ManagedTransaction
from neo4j.exceptions import ClientError

from knowledge.base import KnowledgeError

SCHEMA_VERSION = 2
SCHEMA_ID = "tuner"

Migration = Callable[[Driver, str], None]
"""One step: (driver, database) -> None. Must be idempotent (a crash may repeat it)."""

_VERSION_1 = (
    "CREATE CONSTRAINT tuner_execution_id IF NOT EXISTS FOR (e:Execution) REQUIRE e.id IS UNIQUE",
    "CREATE CONSTRAINT tuner_pod_key IF NOT EXISTS FOR (p:Pod) REQUIRE p.key IS UNIQUE",
    "CREATE CONSTRAINT tuner_schema_id IF NOT EXISTS FOR (s:TunerSchema) REQUIRE s.id IS UNIQUE",
    "CREATE INDEX tuner_execution_load IF NOT EXISTS FOR (e:Execution) ON (e.load)",
    "CREATE INDEX tuner_execution_end IF NOT EXISTS FOR (e:Execution) ON (e.end)",
    "CREATE INDEX tuner_pod_workload IF NOT EXISTS FOR (p:Pod) ON (p.workload)",
)


def run_schema_statements(driver: Driver, database: str, statements: tuple[str, ...]) -> None:
    """Schema commands, each in its own auto-commit transaction, then wait for the indexes.

    Two tuners starting at once may race to create the same rule; the loser's "already
    exists" is the outcome it wanted.
    """
    for statement in statements:
        try:
            driver.execute_query(statement, database_=database)
        except ClientError as err:
            if "AlreadyExists" not in (err.code or ""):
                raise
    driver.execute_query("CALL db.awaitIndexes(300)", database_=database)


_VERSION_2 = (
    "CREATE CONSTRAINT tuner_shadow_id IF NOT EXISTS FOR (s:ShadowCycle) REQUIRE s.id IS UNIQUE",
    "CREATE INDEX tuner_shadow_at IF NOT EXISTS FOR (s:ShadowCycle) ON (s.at)",
)


def _version_1(driver: Driver, database: str) -> None:
    run_schema_statements(driver, database, _VERSION_1)


def _version_2(driver: Driver, database: str) -> None:
    run_schema_statements(driver, database, _VERSION_2)


MIGRATIONS: dict[int, Migration] = {1: _version_1, 2: _version_2}
"""Step that brings a graph *to* the version of its key."""


def stored_version(tx: ManagedTransaction) -> Any:
    """The version the graph says it has (0 for a graph the tuner never set up)."""
    row = tx.run(
        "OPTIONAL MATCH (s:TunerSchema {id: $id}) RETURN s.version AS version", id=SCHEMA_ID
    ).single()
    return 0 if row is None or row["version"] is None else row["version"]


def _set_version(tx: ManagedTransaction, version: int) -> None:
    tx.run(
        "MERGE (s:TunerSchema {id: $id}) "
        "SET s.version = CASE WHEN coalesce(s.version, 0) < $version THEN $version "
        "ELSE s.version END, s.updated = datetime()",
        id=SCHEMA_ID,
        version=version,
    ).consume()


def ensure_schema(driver: Driver, database: str, server: str, *, read_only: bool) -> int:
    """Check the stored version, migrate up to :data:`SCHEMA_VERSION` unless ``read_only``.

    Returns the version the graph has afterwards. Raises KnowledgeError for a newer or
    unreadable version; driver errors propagate (the caller translates them).
    """
    with driver.session(database=database) as session:
        version = session.execute_read(stored_version)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise KnowledgeError(f"{server}: unreadable tuner schema version {version!r}")
    if version > SCHEMA_VERSION:
        raise KnowledgeError(
            f"{server} holds tuner schema {version}, newer than this tuner's "
            f"{SCHEMA_VERSION}: upgrade the tuner"
        )
    if read_only or version == SCHEMA_VERSION:
        return version
    for step in range(version + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[step](driver, database)
        with driver.session(database=database) as session:
            session.execute_write(_set_version, step)
    return SCHEMA_VERSION

"""Open the knowledge base that settings.json names."""

from __future__ import annotations

import os
from pathlib import Path

from knowledge.base import KnowledgeBase, KnowledgeError
from knowledge.embedded import EmbeddedKnowledgeBase
from tuner.errors import InputError
from tuner.redact import redact_url
from tuner.settings import Knowledge


def neo4j_password(settings: Knowledge) -> str:
    """The Neo4j password from the environment variable ``knowledge.password_env`` names."""
    password = os.environ.get(settings.password_env)
    if not password:
        raise KnowledgeError(
            f"Neo4j at {redact_url(settings.uri)}: the password variable {settings.password_env} "
            "(knowledge.password_env) is not set"
        )
    return password


def open_knowledge(
    settings: Knowledge, *, read_only: bool = False, create: bool = True
) -> KnowledgeBase:
    """The configured backend, connected; ``read_only`` never creates or changes anything,
    and without ``create`` a missing embedded store is an error rather than a new file.

    Raises KnowledgeError when the store cannot be reached or used.
    """
    if settings.backend == "embedded":
        return EmbeddedKnowledgeBase(Path(settings.path), read_only=read_only, create=create)
    if settings.backend == "neo4j":
        from knowledge.neo4j_store import Neo4jKnowledgeBase  # the driver loads only when used

        return Neo4jKnowledgeBase(
            settings.uri,
            settings.user,
            neo4j_password(settings),
            settings.database,
            read_only=read_only,
        )
    raise InputError(f"knowledge.backend {settings.backend!r} is not supported by this build")

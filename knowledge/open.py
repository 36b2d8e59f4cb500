"""Open the knowledge base that settings.json names."""

from __future__ import annotations

from pathlib import Path

from knowledge.base import KnowledgeBase
from knowledge.embedded import EmbeddedKnowledgeBase
from tuner.errors import InputError
from tuner.settings import Knowledge


def open_knowledge(settings: Knowledge, *, read_only: bool = False) -> KnowledgeBase:
    """The configured backend, connected; ``read_only`` never creates or changes anything."""
    if settings.backend != "embedded":
        raise InputError(f"knowledge.backend {settings.backend!r} is not supported by this build")
    return EmbeddedKnowledgeBase(Path(settings.path), read_only=read_only)

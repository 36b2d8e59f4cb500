"""What a cycle reads from and writes to the knowledge base: the entries the previous-deployment
option may choose from, the stable deployment it records, the entries it forgets. A knowledge
base that fails costs the cycle only that step (logged)."""

from __future__ import annotations

import logging

from knowledge.base import KnowledgeBase, KnowledgeError
from tuner.model.cluster import Cluster
from tuner.model.execution import Execution
from tuner.model.load import Load
from tuner.model.price import nodes_cost
from tuner.settings import Settings

log = logging.getLogger("tuner.cycle")
"""The cycle's log: these are steps of a cycle (the simulator quiets it)."""


def record(kb: KnowledgeBase, execution: Execution, awaiting: str | None) -> str | None:
    """Record a stable deployment (``awaiting``: the previous deployment chosen last cycle,
    which it proves stable again); its id, or None when the knowledge base failed (logged)."""
    try:
        kb.record(execution)
    except KnowledgeError as err:
        log.warning("stable deployment not recorded: %s", err)
        return None
    if awaiting:
        log.info(
            "previous deployment %s proved stable again: recorded as %s", awaiting, execution.id
        )
    return execution.id


def previous_candidates(
    kb: KnowledgeBase, cluster: Cluster, settings: Settings, load: Load
) -> list[Execution]:
    """The knowledge-base entries the previous-deployment option may choose from: for this load
    (within ``load.delta`` in every dimension), cheaper than the cluster now, the cheapest
    ``knowledge.lookup_limit`` of them.

    The analysis takes the first attainable one and never looks at a dearer entry, so nothing
    beyond these could change its answer unless all of them are unattainable. Those are
    deleted after the analysis (not in a dry run), so the next window reads the next ones.
    """
    return kb.find_by_load(
        load.total,
        settings.load.delta,
        cheaper_than=nodes_cost(cluster.nodes, settings.pricing),
        limit=settings.knowledge.lookup_limit,
        vector=load.values,
    )


def entries_for(
    kb: KnowledgeBase, cluster: Cluster, settings: Settings, load: Load
) -> list[Execution]:
    """:func:`previous_candidates`, none when the knowledge base cannot be reached (logged):
    the previous-deployment option skips that window, nothing else."""
    try:
        return previous_candidates(kb, cluster, settings, load)
    except KnowledgeError as err:
        log.warning("previous-deployment option skipped this window: %s", err)
        return []


def forget_entry(kb: KnowledgeBase, entry: str, why: str) -> None:
    """Delete a knowledge-base entry, ``why`` logged; a failure is logged, not raised."""
    try:
        if kb.delete(entry):
            log.info("knowledge base: deleted %s (%s)", entry, why)
    except KnowledgeError as err:
        log.warning("knowledge base: could not delete %s (%s): %s", entry, why, err)

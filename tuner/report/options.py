"""How each option is shown: its name in the cycle log, what the log says when it has nothing
to propose, the structured-log field of its cost, and the reason of the Kubernetes Event of a
cycle that carried it out. The analysis names options by :class:`~tuner.analyse.options.Choice`
only."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.analyse.options import Choice


@dataclass(frozen=True)
class Shown:
    """How one option is shown."""

    label: str
    """Its name in the cycle log (e.g. ``remove nodes``)."""
    absent: str
    """What the cycle log says when it has nothing to propose (e.g. ``impossible``)."""
    field: str
    """The structured-log field of its cost (e.g. ``cost_removal``)."""
    event: str
    """The reason of a cycle's Kubernetes Event when the cycle carried it out."""


SHOWN: dict[Choice, Shown] = {
    Choice.REMOVE_NODES: Shown("remove nodes", "impossible", "cost_removal", "RemovedNodes"),
    Choice.PREVIOUS: Shown("previous deployment", "none", "cost_previous", "PreviousDeployment"),
    Choice.REPLACE_NODES: Shown("replace nodes", "impossible", "cost_replace", "ReplacedNodes"),
    Choice.RANDOM: Shown("random migration", "none", "cost_exploration", "RandomMigration"),
}

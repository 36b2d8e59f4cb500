"""Human-readable rendering of a plan: the table ``tuner plan`` and ``--dry-run`` print."""

from __future__ import annotations

from tuner.analyse.usable import Utilization
from tuner.model.onboarding import Placement
from tuner.model.price import PriceSource, TypePrice
from tuner.plan import actions as plan
from tuner.plan.actions import Action, Add, Migrate, ProvisionNode, Remove, RemoveNode
from tuner.report.build import PlanReport


def _percent(value: float) -> str:
    return f"{value * 100:5.1f}%"


def _utilization_row(label: str, u: Utilization) -> str:
    return (
        f"  {label:<7} cpu {_percent(u.cpu)}  memory {_percent(u.memory)}  "
        f"usable cpu {_percent(u.usable_cpu)}  usable memory {_percent(u.usable_memory)}"
    )


def _describe(action: Action) -> tuple[str, str, str, str]:
    match action:
        case Migrate(pod=pod, target=target):
            return ("migrate", pod.key, pod.node or "", target)
        case Add(workload=workload, target=target):
            return ("add", str(workload), "", target)
        case Remove(pod=pod):
            return ("remove", pod.key, pod.node or "", "")
        case RemoveNode(node=node):
            return ("remove_node", node, node, "")
        case ProvisionNode(node=node, pool=pool):
            return ("provision_node", f"{pool.name} ({pool.node_type})", "", node)


def _note(placement: Placement | None) -> str:
    """Only the exception is worth a note: a new pod the tuner cannot steer."""
    return placement.value if placement is Placement.EVICTION_ONLY else ""


SOURCES = {
    PriceSource.ANNOTATION: "node annotation",
    PriceSource.NODE_TYPES: "pricing.node_types",
    PriceSource.FORMULA: "per-core/GiB formula",
}


def render_prices(prices: tuple[TypePrice, ...], currency: str) -> str:
    """``e2-standard-4 x3 at 0.1340 USD/h (pricing.node_types); ...``: what each node type was
    costed at and where that price came from."""
    return "; ".join(
        f"{p.node_type} x{p.nodes} at {p.price:.4f} {currency}/h ({SOURCES[p.source]})"
        for p in prices
    )


def describe(action: Action) -> str:
    """One line: ``migrate ns/pod node-1 -> node-2``, ``remove_node node-3``, ..."""
    op, obj, source, target = _describe(action)
    where = f"{source} -> {target}" if source and target else (f"-> {target}" if target else source)
    return f"{op} {obj}" + (f" {where}" if where and where != obj else "")


def render_text(report: PlanReport) -> str:
    """The decision, costs, utilization and a table of the ordered actions."""
    analysis = report.analysis
    currency = report.currency
    lines = [
        f"decision: {analysis.decision.value}",
        f"reason:   {analysis.reason}",
        f"cost:     {analysis.cost_current:.4f} -> {analysis.cost_after:.4f} {currency}/h"
        f" (saving {analysis.cost_current - analysis.cost_after:.4f} {currency}/h)",
        f"prices:   {render_prices(report.prices, currency)}",
        "utilization (requests over allocatable, and over usable capacity):",
        _utilization_row("before", report.before),
        _utilization_row("after", report.after),
    ]
    for forget in analysis.forget:
        lines.append(f"{forget.kind} previous deployment {forget.entry}: {forget.reason}")
    if not report.actions:
        lines.append("actions:  none")
        return "\n".join(lines)
    rows = [("#", "action", "object", "from", "to", "note")] + [
        (str(i), *_describe(a), _note(report.placement(a))) for i, a in enumerate(report.actions, 1)
    ]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines.append("actions:")
    for row in rows:
        lines.append(
            "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        )
    nodes, first = plan.emptied(report.actions), plan.first_move(report.actions)
    if nodes and first is not None:
        lines.append(
            f"before action {first + 1}: {', '.join(nodes)} cordoned and tainted, so that no pod "
            "lands there any more (undone if the transition stops before removing them)"
        )
    return "\n".join(lines)

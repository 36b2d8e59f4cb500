"""PNG plots like the thesis' Figures 5.18-5.20: cost per hour over time for every strategy
and the lower bound, above the load (headless matplotlib)."""

from __future__ import annotations

import io
import textwrap
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from tuner.sim.report import Comparison
from tuner.sim.strategies import LABELS

STYLES: dict[str, dict[str, Any]] = {
    "autoscaler": {"color": "tab:blue", "linewidth": 3.5, "alpha": 0.45},
    "binpacking": {"color": "tab:purple", "linewidth": 1.0},
    "descheduler": {"color": "tab:brown", "linewidth": 1.0},
    "karpenter": {"color": "tab:red", "linewidth": 1.0},
    "tuner2019": {"color": "tab:orange", "linewidth": 1.2},
    "tuner": {"color": "tab:green", "linewidth": 1.4, "linestyle": "--"},
    "tuner-unlimited": {"color": "tab:olive", "linewidth": 1.2, "linestyle": ":"},
    "tuner-reserve": {"color": "tab:gray", "linewidth": 1.2, "linestyle": ":"},
    "binpacking-tuner": {"color": "tab:pink", "linewidth": 1.2, "linestyle": "-."},
    "karpenter-tuner": {"color": "tab:cyan", "linewidth": 1.2, "linestyle": "-."},
}
"""A wide, light CA-alone line under a dashed tuner line: where they are equal, both show."""
DPI = 110
TITLE_WIDTH = 90
"""Characters per line of the title (a scenario file's title may have 200): longer ones wrap,
so the 10-inch figure never clips them."""


def plot(comparison: Comparison) -> bytes:
    """The cost-over-time and load plot of one comparison, as PNG."""
    figure = draw(comparison)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    plt.close(figure)
    return buffer.getvalue()


def draw(comparison: Comparison) -> Figure:
    """The cost-over-time and load figure of one comparison (close it after use)."""
    scenario = comparison.scenario
    base = comparison.outcomes[0].series
    hours = [t / 3600 for t in base.time]
    figure, (cost_axis, load_axis) = plt.subplots(
        2, 1, figsize=(10, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    for outcome in comparison.outcomes:
        series = outcome.series
        cost_axis.step(
            [t / 3600 for t in series.time],
            series.cost,
            where="post",
            label=LABELS[outcome.strategy],
            **STYLES.get(outcome.strategy, {}),
        )
    cost_axis.step(
        hours,
        comparison.lower_bound,
        where="post",
        label="lower bound",
        linestyle=":",
        color="black",
        linewidth=1.0,
    )
    cost_axis.set_ylabel(f"cost ({scenario.currency}/h)")
    cost_axis.set_title(textwrap.fill(f"{scenario.title} (seed {comparison.seed})", TITLE_WIDTH))
    cost_axis.legend(loc="upper right", fontsize="small")
    cost_axis.grid(alpha=0.3)
    load_axis.plot(hours, base.load, color="tab:gray")
    load_axis.set_ylabel("load (req/s)")
    load_axis.set_xlabel("time (h)")
    load_axis.grid(alpha=0.3)
    figure.tight_layout()
    return figure

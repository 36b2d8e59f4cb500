"""Cost of nodes, and usable capacity with the down-scaling thesis' Figure 4.1 numbers."""

from fractions import Fraction

import pytest

from testkit.builders import node
from tuner.analyse.usable import Utilization, usable_capacity
from tuner.model.price import node_price, nodes_cost
from tuner.model.quantity import GIB
from tuner.model.resources import Resources
from tuner.settings import Pricing, Usability

PRICING = Pricing(price_per_core=0.03, price_per_gb=0.004, node_types={"e2-standard-4": 0.134})


def test_formula_uses_capacity_not_allocatable() -> None:
    n = node("n", "4", "16Gi", allocatable=("3920m", "13Gi"))
    assert node_price(n, PRICING) == pytest.approx(4 * 0.03 + 16 * 0.004)


def test_price_table_beats_formula_and_annotation_beats_table() -> None:
    typed = node("t", instance_type="e2-standard-4")
    assert node_price(typed, PRICING) == 0.134
    annotated = node(
        "a", instance_type="e2-standard-4", annotations={"tuner.dev/price-per-hour": "0.05"}
    )
    assert node_price(annotated, PRICING) == 0.05
    assert nodes_cost([typed, annotated], PRICING) == pytest.approx(0.184)


# Figure 4.1: nodes of 4000m / 8G; thresholds min 100m / 0.9G, max cpu:mem 3.6, mem:cpu 20.
FIG41 = Usability(
    min_cpu=100,
    min_memory=int(0.9 * GIB),
    max_cpu_to_memory=Fraction("3.6"),
    max_memory_to_cpu=Fraction(20),
)
CAPACITY = Resources(4000, 8 * GIB)
NODE1 = Resources(3800, int(1.5 * GIB))  # pods A (1800m, 0.5G) and B (2000m, 1G)
NODE2 = Resources(1600, 8 * GIB)  # pods C (1400m, 4G) and D (200m, 4G)


def test_figure_4_1_node_1_free_memory_is_capped_by_free_cpu() -> None:
    usable = usable_capacity(CAPACITY, NODE1, FIG41)
    # free RAM 6.5G is capped at 200m * 20 G/core = 4G; free CPU 200m stays usable
    assert usable == Resources(4000, int(1.5 * GIB) + 4 * GIB)


def test_figure_4_1_node_2_without_free_memory_keeps_only_its_requests() -> None:
    assert usable_capacity(CAPACITY, NODE2, FIG41) == NODE2


def test_figure_4_1_cluster_utilization() -> None:
    u = Utilization.of([(CAPACITY, NODE1), (CAPACITY, NODE2)], FIG41)
    assert u.cpu == pytest.approx(5400 / 8000)
    assert u.memory == pytest.approx(9.5 / 16)
    assert u.usable_cpu == pytest.approx(5400 / 5600)
    assert u.usable_memory == pytest.approx(9.5 / 13.5)


def test_cpu_is_capped_by_free_memory() -> None:
    lots_of_cpu = usable_capacity(
        Resources(8000, 4 * GIB), Resources(0, 3 * GIB), Usability(max_cpu_to_memory=Fraction(2))
    )
    assert lots_of_cpu == Resources(2000, 4 * GIB)  # 1 GiB free * 2 cores/GiB


def test_no_usability_limits_means_usable_is_allocatable() -> None:
    assert usable_capacity(CAPACITY, NODE1, Usability()) == CAPACITY

"""The eviction budget: rolling hour and day, cluster-wide, each namespace, named namespaces."""

from __future__ import annotations

import pytest

from testkit.builders import pod
from tuner.model.limits import DAY_S, HOUR_S, Budget, EvictionLimit, Limits, Spent, pod_evictions
from tuner.plan.actions import Add, Migrate, Remove, RemoveNode, evictions

NOW = 1_000_000.0


def budget(limits: Limits, *spent: tuple[float, dict[str, int]]) -> Budget:
    """The budget at NOW after transitions ``age seconds ago -> pods per namespace``."""
    return Budget.of(limits, [Spent.of(NOW - age, counts) for age, counts in spent], NOW)


def test_without_limits_everything_fits() -> None:
    assert not Limits().budgeted
    assert budget(Limits(), (0, {"shop": 10_000})).refusal({"shop": 10_000}) is None


def test_the_cluster_hour_counts_the_last_60_minutes_only() -> None:
    limits = Limits(cluster=EvictionLimit(per_hour=5))
    assert limits.budgeted
    recent = budget(limits, (HOUR_S - 1, {"shop": 3}), (HOUR_S, {"shop": 100}))
    assert recent.hour == {"shop": 3}
    assert recent.refusal({"shop": 2}) is None
    assert recent.refusal({"web": 3}) == (
        "3 evictions would exceed limits.evictions_per_hour 5 (3 in the last hour)"
    )


def test_the_cluster_day_counts_the_last_24_hours_and_the_first_limit_broken_is_named() -> None:
    limits = Limits(cluster=EvictionLimit(per_hour=10, per_day=12))
    spent = budget(limits, (2 * HOUR_S, {"a": 6}), (DAY_S - 1, {"b": 4}), (DAY_S, {"c": 50}))
    assert spent.day == {"a": 6, "b": 4}
    assert spent.hour == {}
    assert spent.refusal({"a": 2}) is None
    assert spent.refusal({"a": 3}) == (
        "3 evictions would exceed limits.evictions_per_day 12 (10 in the last day)"
    )
    assert budget(limits).refusal({"a": 11}) == (
        "11 evictions would exceed limits.evictions_per_hour 10 (0 in the last hour)"
    )


def test_zero_allows_no_eviction_but_a_change_without_any() -> None:
    limits = Limits(cluster=EvictionLimit(per_hour=0))
    assert budget(limits).refusal({"shop": 1}) is not None
    assert budget(limits).refusal({}) is None
    assert budget(limits).refusal({"shop": 0}) is None


def test_each_namespace_has_its_own_budget_and_a_named_one_replaces_it() -> None:
    limits = Limits(
        each_namespace=EvictionLimit(per_hour=2),
        namespaces={"batch": EvictionLimit(per_hour=None, per_day=1), "shop": EvictionLimit(4)},
    )
    spent = budget(limits, (60, {"web": 2, "shop": 3, "batch": 5}))
    assert spent.refusal({"api": 2}) is None  # another namespace's evictions do not count
    assert spent.refusal({"web": 1}) == (
        "1 evictions in namespace web would exceed its limit of 2 per hour (2 in the last hour)"
    )
    assert spent.refusal({"shop": 1}) is None
    assert spent.refusal({"shop": 2}) is not None
    assert spent.refusal({"batch": 1}) == (
        "1 evictions in namespace batch would exceed its limit of 1 per day (5 in the last day)"
    )
    open_batch = Limits(namespaces={"batch": EvictionLimit()}, each_namespace=EvictionLimit(1))
    assert budget(open_batch).refusal({"batch": 100}) is None  # named without limits: none


def test_only_migrations_and_removals_count_as_evictions() -> None:
    web, db = pod("web-1", "a", namespace="shop"), pod("db-1", "a", namespace="data")
    actions = [
        Migrate(web, "b"),
        Remove(db),
        Add(web.workload, "b", web.requests),
        RemoveNode("a"),
        Migrate(pod("web-2", "a", namespace="shop"), "c"),
    ]
    assert evictions(actions) == {"shop": 2, "data": 1}
    assert pod_evictions([]) == {}


def test_a_record_keeps_only_namespaces_with_evictions() -> None:
    record = Spent.of(5.0, {"b": 2, "a": 0, "c": 1})
    assert record.namespaces == (("b", 2), ("c", 1))
    assert record.total == 3


@pytest.mark.parametrize("age", [0.0, HOUR_S - 0.001])
def test_an_eviction_just_made_counts_in_the_hour(age: float) -> None:
    limits = Limits(cluster=EvictionLimit(per_hour=1))
    assert budget(limits, (age, {"x": 1})).refusal({"x": 1}) is not None

"""Node pools: found from each pool label, the instance type or the settings; templates."""

import pytest

from testkit.builders import cluster, node
from tuner.model.constraints import Taint
from tuner.model.conventions import POOL_LABELS
from tuner.model.pools import discover
from tuner.settings import Settings, settings_from_dict


@pytest.mark.parametrize("label", POOL_LABELS)
def test_a_pool_label_names_the_pool_and_selects_it(label: str) -> None:
    c = cluster(
        [
            node("n-1", labels={label: "general"}, instance_type="e2-standard-4"),
            node("n-2", labels={label: "general"}, instance_type="e2-standard-4"),
        ],
        [],
    )
    pools = discover(c, Settings())
    (pool,) = pools.by_name.values()
    assert (pool.name, pool.node_type, dict(pool.selector)) == (
        "general",
        "e2-standard-4",
        {label: "general"},
    )
    assert pools.size("general") == 2 and pools.node_pool["n-1"] == "general"


def test_the_instance_type_is_the_fallback_pool() -> None:
    c = cluster([node("n-1", instance_type="m5.large"), node("bare")], [])
    pools = discover(c, Settings())
    assert list(pools.by_name) == ["m5.large"]
    assert dict(pools.by_name["m5.large"].selector) == {
        "node.kubernetes.io/instance-type": "m5.large"
    }
    assert "bare" not in pools.node_pool


def test_a_settings_selector_wins_and_bounds_default_to_zero_and_no_limit() -> None:
    settings = settings_from_dict({"pools": {"batch": {"selector": {"team": "b"}, "max": 4}}})
    c = cluster(
        [
            node("n-1", labels={"team": "b", POOL_LABELS[0]: "gke-x"}, instance_type="t"),
            node("n-2", labels={POOL_LABELS[0]: "gke-x"}, instance_type="t"),
        ],
        [],
    )
    pools = discover(c, settings)
    assert pools.node_pool == {"n-1": "batch", "n-2": "gke-x"}
    assert (pools.by_name["batch"].min_size, pools.by_name["batch"].max_size) == (0, 4)
    assert (pools.by_name["gke-x"].min_size, pools.by_name["gke-x"].max_size) == (0, None)
    assert pools.room("batch") == 3 and pools.room("gke-x") is None


def test_a_template_is_a_cleaned_copy_of_a_node() -> None:
    own = Taint("tuner.dev/draining", "", "NoSchedule")
    ca = Taint("ToBeDeletedByClusterAutoscaler", "1", "NoSchedule")
    gpu = Taint("gpu", "true", "NoSchedule")
    n = node(
        "n-1",
        labels={POOL_LABELS[0]: "gpu", "tuner.dev/web": "1"},
        annotations={"tuner.dev/price-per-hour": "0.5", "other": "x"},
        taints=(own, ca, gpu),
        unschedulable=True,
        instance_type="g2",
    )
    template = discover(cluster([n], []), Settings()).by_name["gpu"].template
    assert template.name == "" and not template.unschedulable
    assert dict(template.labels) == {
        POOL_LABELS[0]: "gpu",
        "node.kubernetes.io/instance-type": "g2",
    }
    assert dict(template.annotations) == {"tuner.dev/price-per-hour": "0.5"}
    assert template.taints == (gpu,)


def test_a_configured_pool_without_nodes_has_its_template() -> None:
    settings = settings_from_dict(
        {
            "pools": {
                "big": {
                    "min": 0,
                    "max": 2,
                    "template": {
                        "instance_type": "e2-standard-8",
                        "cpu": "7910m",
                        "memory": "29Gi",
                        "pods": 64,
                        "labels": {POOL_LABELS[0]: "big"},
                        "taints": [{"key": "dedicated", "value": "x"}],
                    },
                },
                "unknown": {"min": 1},
            }
        }
    )
    pools = discover(cluster([], []), settings)
    assert list(pools.by_name) == ["big"]  # "unknown" has neither a node nor a template
    big = pools.by_name["big"]
    assert (big.node_type, big.template.allocatable.cpu, big.template.max_pods) == (
        "e2-standard-8",
        7910,
        64,
    )
    assert dict(big.selector) == {POOL_LABELS[0]: "big"}
    assert big.template.taints == (Taint("dedicated", "x", "NoSchedule"),)
    assert pools.size("big") == 0 and pools.room("big") == 2


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"pools": {"p": {"min": 3, "max": 2}}}, "pools.p.max: 2 is below min 3"),
        (
            {"pools": {"p": {"template": {"instance_type": "t", "cpu": "x", "memory": "1"}}}},
            "pools.p.template.cpu: ",
        ),
        ({"pools": {"p": {"size": 1}}}, "unknown key 'size'"),
    ],
)
def test_bad_pool_settings_name_the_field(document: object, message: str) -> None:
    with pytest.raises(Exception, match=message):
        settings_from_dict(document)


def test_a_pool_with_nodes_takes_its_template_from_them_not_from_the_settings() -> None:
    template = {"instance_type": "e2-standard-4", "cpu": "1", "memory": "1Gi"}
    settings = settings_from_dict({"pools": {"general": {"template": template}}})
    c = cluster([node("n-1", "4", "16Gi", labels={POOL_LABELS[0]: "general"})], [])
    assert discover(c, settings).by_name["general"].template.allocatable.cpu == 4000
    assert discover(cluster([], []), settings).by_name["general"].template.allocatable.cpu == 1000


def test_a_pool_over_several_zones_promises_no_zone_to_a_new_node() -> None:
    zone = "topology.kubernetes.io/zone"
    gke = "cloud.google.com/gke-nodepool"
    nodes = [
        node("a-1", labels={gke: "multi", zone: "a"}),
        node("b-1", labels={gke: "multi", zone: "b"}),
        node("c-1", labels={gke: "single", zone: "c"}),
    ]
    pools = discover(cluster(nodes, []), Settings())
    assert zone not in pools.by_name["multi"].template.labels
    assert pools.by_name["single"].template.labels[zone] == "c"

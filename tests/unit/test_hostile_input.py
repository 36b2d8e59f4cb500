"""Named regressions of issue 15: hostile settings, dumps, quantities and numbers on the command
line end with one line naming what is wrong and exit status 2 (in-process, no server)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from testkit.builders import node
from tuner.cli import main
from tuner.errors import InputError
from tuner.json_input import MAX_DEPTH, parse_json
from tuner.model.price import node_price
from tuner.model.quantity import count, cpu_millis, memory_bytes
from tuner.monitor.dump import cluster_from_objects
from tuner.settings import Pricing

EXAMPLE = Path(__file__).parents[2] / "examples" / "cluster-dump.json"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tuner: error:"), err
    return status, lines[0]


def _node(name: str, **annotations: str) -> dict[str, object]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def _pod(name: str, node_name: str, cpu: object = "100m") -> dict[str, object]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"nodeName": node_name, "containers": [{"resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running"},
    }


@pytest.mark.parametrize(
    "text", ["1e999999999", "1e400", "100E", "9Ei", "-1", "1" * 200, "0x10", "1e-999999"]
)
def test_quantities_are_bounded(text: str) -> None:
    with pytest.raises(InputError, match="quantity"):
        memory_bytes(text)
    with pytest.raises(InputError, match="quantity"):
        cpu_millis(text)


def test_counts_are_bounded() -> None:
    assert count("110") == 110
    with pytest.raises(InputError, match=r"outside 0\.\.1000000"):
        count("1e30")


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000, "NaN", "[Infinity]", '{"a": -Infinity}', "[1e400]", "1" * 5000],
)
def test_json_limits(text: str) -> None:
    with pytest.raises(InputError) as err:
        parse_json(text, "dump x")
    assert "\n" not in str(err.value) and str(err.value).startswith("dump x")


def test_json_depth_limit_is_exact() -> None:
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x") == parse_json(
        "[" * MAX_DEPTH + "]" * MAX_DEPTH, "x"
    )
    with pytest.raises(InputError, match=f"more than {MAX_DEPTH}"):
        parse_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "x")
    assert parse_json('["[[[[" ]', "x") == ["[[[["]  # brackets in strings do not count


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        ([_node("n1"), _node("n1")], "node n1 appears twice"),
        ([_node("n1"), _pod("p", "n1"), _pod("p", "n1")], "pod shop/p appears twice"),
        ([_node("n1", **{"tuner.dev/price-per-hour": "abc"})], "not a price >= 0"),
        ([_node("n1", **{"tuner.dev/price-per-hour": "-5"})], "not a price >= 0"),
        ([_node("n1", **{"tuner.dev/price-per-hour": "nan"})], "not a price >= 0"),
        ([_node("n1"), _pod("p", "n1", cpu="-1")], "outside 0.."),
        ([_node("n1"), _pod("p", "n1", cpu="1e999999999")], "invalid quantity"),
        ([{"kind": "ReplicaSet"}], "metadata is missing"),
        (
            [{"kind": "ReplicaSet", "metadata": {"name": "r", "ownerReferences": "x"}}],
            "ownerReferences is not a list",
        ),
        ([{"kind": "Node", "metadata": {"name": 5}}], "metadata.name is 5"),
        (
            [
                {
                    "kind": "HorizontalPodAutoscaler",
                    "metadata": {"name": "h"},
                    "spec": {
                        "scaleTargetRef": {"kind": "Deployment", "name": "w"},
                        "maxReplicas": 1e30,
                    },
                }
            ],
            "spec.maxReplicas",
        ),
    ],
)
def test_unusable_objects_fail_a_dump(items: list[dict[str, object]], fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        cluster_from_objects(items)


def test_unusable_live_objects_are_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    items = [
        _node("good"),
        _node("priced", **{"tuner.dev/price-per-hour": "-5"}),
        _pod("p", "good"),
        _pod("q", "priced"),
        {"kind": "ReplicaSet", "metadata": {"name": "r", "ownerReferences": "x"}},
    ]
    with caplog.at_level(logging.WARNING):
        cluster = cluster_from_objects(items, strict=False)
    assert [n.name for n in cluster.nodes] == ["good"]
    assert [p.name for p in cluster.pods] == ["p"]
    text = caplog.text
    assert "node 'priced'" in text and "pod shop/q is on unknown node" in text
    assert "replicaset 'r'" in text


def test_a_bad_custom_price_annotation_is_never_planned() -> None:
    pricing = Pricing(price_annotation="example.com/price")
    base = node("n1", cpu="4", memory="16Gi")
    for text in ("abc", "-5", "nan", "inf"):
        priced = node("n1", cpu="4", memory="16Gi", annotations={"example.com/price": text})
        assert node_price(priced, pricing) == node_price(base, pricing) > 0


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ('{"analyse": {"thresholds": {"cpu": NaN}}}', "NaN is not a number"),
        ('{"analyse": {"usability": {"max_cpu_to_memory": Infinity}}}', "Infinity"),
        ('{"load": {"delta": NaN}}', "NaN"),
        ('{"windows": {"measure_s": 1e400}}', "1e400 is out of range"),
        ('{"analyse": {"usability": {"min_cpu": "1e999999999"}}}', "invalid quantity"),
        ('{"pricing": {"price_per_core": 1e300}}', "greater than the maximum"),
        ("[" * 100_000, "nests 100000 levels deep"),
    ],
)
def test_hostile_settings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, document: str, fragment: str
) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(document)
    status, line = _run(capsys, "plan", "--snapshot", str(EXAMPLE), "--settings", str(settings))
    assert status == 2 and fragment in line


def test_settings_must_be_utf8(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_bytes(b'{"load": {"pod_name": "\xff"}}')
    status, line = _run(capsys, "plan", "--snapshot", str(EXAMPLE), "--settings", str(settings))
    assert status == 2 and "is not UTF-8" in line


def test_dump_must_be_utf8(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dump = tmp_path / "dump.json"
    dump.write_bytes(b'{"items": [], "x": "\xfe"}')
    status, line = _run(capsys, "plan", "--snapshot", str(dump))
    assert status == 2 and "is not UTF-8" in line


def test_duplicate_nodes_in_a_dump(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"items": [_node("n1"), _node("n1")]}))
    status, line = _run(capsys, "plan", "--snapshot", str(dump))
    assert status == 2 and "node n1 appears twice" in line


def test_a_malformed_scheduling_rule_in_a_dump(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pod = _pod("p", "n1")
    pod["spec"]["topologySpreadConstraints"] = [  # type: ignore[index]
        {"maxSkew": 0, "topologyKey": "topology.kubernetes.io/zone"}
    ]
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"items": [_node("n1"), pod]}))
    status, line = _run(capsys, "plan", "--snapshot", str(dump))
    assert status == 2
    assert "pod 'shop/p': spec.topologySpreadConstraints[0].maxSkew is 0" in line


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["kb", "list", "--limit", "1" * 25], "--limit"),
        (["kb", "list", "--limit", "-1"], "--limit"),
        (["monitor", "--window", "1e300"], "--window"),
        (["monitor", "--window", "nan"], "--window"),
        (["kb", "prune", "--older-than", "9" * 400 + "d"], "--older-than"),
        (["plan", "--snapshot", "x", "--load", "inf"], "--load"),
        (["plan", "--snapshot", "x", "--load", "1e300"], "--load"),
        (["kb", "record", "--snapshot", "x", "--load", "1", "--window", "-5"], "--window"),
    ],
)
def test_hostile_numbers_on_the_command_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1
    assert err.startswith("tuner: error:") and fragment in err


@pytest.mark.parametrize(
    ("kubeconfig", "fragment"),
    [("not: [yaml", "is not valid YAML"), ("clusters: 5", "is malformed"), ("- a", "is malformed")],
)
@pytest.mark.parametrize("argv", [["plan", "--live"], ["onboard", "--all", "--dry-run"], ["run"]])
def test_a_malformed_kubeconfig(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    kubeconfig: str,
    fragment: str,
    argv: list[str],
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"kubernetes": {"kubeconfig": str(config)}}))
    status, line = _run(capsys, *argv, "--settings", str(settings))
    assert status == 2 and fragment in line

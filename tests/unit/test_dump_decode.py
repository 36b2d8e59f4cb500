"""The dump decoder: items decoded one at a time and pruned give the stdlib-parsed cluster."""

import gc
import json
from pathlib import Path
from typing import Any

import pytest

from tuner.errors import InputError
from tuner.monitor import dump
from tuner.monitor.decode import gc_paused, list_items
from tuner.monitor.dump import cluster_from_objects, load_dump

EXAMPLE = Path(__file__).parents[2] / "examples" / "cluster-dump.json"

_NOISE: dict[str, Any] = {
    "managedFields": [{"manager": "kwok", "fieldsV1": {"f:status": {"f:phase": {}}}}],
    "creationTimestamp": "2026-11-23T16:00:00Z",
}


def _as_kubectl_prints_it(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` with the bulk a real ``kubectl get -o json`` adds (none of it read)."""
    item = json.loads(json.dumps(item))
    item["metadata"].update(_NOISE)
    item.setdefault("status", {})["containerStatuses"] = [{"name": "c", "ready": True}]
    item["status"].setdefault("conditions", []).append({"type": "Initialized", "status": "True"})
    if item["kind"] == "Pod":
        item["spec"]["volumes"] = [{"name": "token", "projected": {"sources": [{}]}}]
        item["spec"]["initContainers"] = [
            {"name": "init", "image": "x", "resources": {"requests": {"cpu": "2"}}}
        ]
        item["spec"]["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "x"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    return item


def _stdlib(path: Path) -> Any:
    return cluster_from_objects(json.loads(path.read_text())["items"])


@pytest.mark.parametrize("noisy", [False, True])
def test_pruned_items_give_the_same_cluster_as_the_whole_document(
    tmp_path: Path, noisy: bool
) -> None:
    document = json.loads(EXAMPLE.read_text())
    if noisy:
        document["items"] = [_as_kubectl_prints_it(i) for i in document["items"]]
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(document, indent=4))
    cluster = load_dump(path)
    assert cluster == _stdlib(path)
    assert len(cluster.pods) > 30
    assert len(path.read_bytes()) > len(json.dumps(list_items(path.read_bytes(), "dump")))


def test_items_keep_only_what_the_parsers_read() -> None:
    data = json.dumps({"kind": "List", "items": [_as_kubectl_prints_it(_pod())]}).encode()
    (item,) = list_items(data, "dump")
    assert "managedFields" not in item["metadata"]
    assert "volumes" not in item["spec"]
    assert "containerStatuses" not in item["status"]
    assert item["spec"]["initContainers"] == [{"resources": {"requests": {"cpu": "2"}}}]


def _pod() -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "image": "x"}], "nodeName": "n"},
        "status": {"phase": "Running"},
    }


def test_unknown_kinds_shrink_and_kindless_items_reach_the_parser() -> None:
    items = [{"kind": "ConfigMap", "data": {"a": "b"}}, {"metadata": {}}, 3]
    data = json.dumps({"items": items}).encode()
    assert list_items(data, "dump") == [{"kind": "ConfigMap"}, {"metadata": {}}, 3]
    with pytest.raises(InputError, match=r"item 1 has no 'kind'"):
        cluster_from_objects(list_items(data, "dump"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", r"^dump x is not valid JSON: "),
        ('{"kind": "Pod"}', r"^dump x is not a Kubernetes List \(no 'items' array\)$"),
        ('{"items": {}}', r"^dump x is not a Kubernetes List"),
        ('{"items": [{"kind": "Pod", "x": 1e400}]}', r"^dump x item 0: .*1e400 is out of range"),
        ('{"items": [{"kind": "Pod", "x": NaN}]}', r"^dump x is not valid JSON"),
        ('{"items": [' + "[" * 5000 + "]" * 5000 + "]}", r"nests too deep"),
    ],
)
def test_bad_documents_are_one_line_input_errors(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        list_items(text.encode(), "dump x")
    assert "\n" not in str(caught.value)


def test_a_dump_over_the_size_limit_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"items": []}) + " " * 100)
    monkeypatch.setattr(dump, "MAX_DUMP_BYTES", 64)
    with pytest.raises(InputError, match=r"dump .*big.json is larger than 0 MiB"):
        load_dump(path)


def test_the_collector_is_paused_while_decoding_and_back_after(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    path.write_text(EXAMPLE.read_text())
    frozen = gc.get_freeze_count()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    load_dump(path)
    assert gc.isenabled()
    assert gc.get_freeze_count() > frozen
    gc.unfreeze()

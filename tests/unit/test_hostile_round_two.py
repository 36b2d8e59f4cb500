"""Named regressions of issue 28 (hostile input, round two), each re-run as the probe ran it:
settings the schema accepted that crashed later or were wrong, secrets and control characters
printed by ``tuner monitor``, dumps and live objects of the wrong shape, and answers no real
Prometheus gives (a 401-digit number, an array 200,000 deep: a fake HTTP server,
:class:`testkit.hostile.RawAnswers`, the one way to produce them)."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.hostile import RawAnswers, raw_answers
from tuner.cli import _fail, main
from tuner.daemon import logs
from tuner.errors import InputError
from tuner.json_input import read_json
from tuner.model.load import Load
from tuner.model.window_report import Verdict, WindowReport
from tuner.monitor.command import render_text
from tuner.monitor.dump import cluster_from_objects
from tuner.monitor.prometheus import PrometheusClient, QueryError
from tuner.settings import Prometheus, settings_from_dict
from tuner.settings_validation import validator

EXAMPLE = Path(__file__).parents[2] / "examples" / "cluster-dump.json"


def _one_line(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tuner: error: "), err
    assert "Traceback" not in err
    return status, lines[0]


# --- settings the schema accepted ---------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({"analyse": {"max_parallel_removals": 2.0}}, "analyse.max_parallel_removals: 2.0 is not"),
        ({"analyse": {"max_replaced_nodes": 2.0}}, "analyse.max_replaced_nodes: 2.0 is not"),
        ({"daemon": {"metrics_port": 0.0}}, "daemon.metrics_port: 0.0 is not of type 'integer'"),
        ({"pricing": {"currency": "\ud800"}}, "pricing.currency: '\\ud800' is not valid Unicode"),
        ({"prometheus": {"url": "http://[::1"}}, "prometheus.url: 'http://[::1' is not a URL"),
        ({"prometheus": {"url": "http://[zz]:9090"}}, "prometheus.url: 'http://[zz]:9090' is"),
        ({"prometheus": {"url": "ftp://h"}}, "prometheus.url: 'ftp://h' is not an http"),
        ({"kubernetes": {"api_server": "file:///etc/passwd"}}, "api_server: 'file:///etc/passwd'"),
        ({"kubernetes": {"api_server": "javascript:alert(1)"}}, "api_server: 'javascript:alert"),
        ({"kubernetes": {"api_server": "ldap://dc.example"}}, "api_server: 'ldap://dc.example'"),
        ({"kubernetes": {"api_server": "https://h:6443?x=1"}}, "without query or fragment"),
        ({"execute": {"label_prefix": "tuner.dev\n"}}, "execute.label_prefix: 'tuner.dev\\n'"),
        (
            {"execute": {"placeholder_priority_class": "placeholder\n"}},
            "execute.placeholder_priority_class: 'placeholder\\n' holds a control",
        ),
        ({"knowledge": {"path": "kb.sqlite\u0000.other"}}, "knowledge.path: 'kb.sqlite\\x00"),
        (
            {"execute": {"node_provision_command": ["/bin/true\u0000"]}},
            "execute.node_provision_command.0: '/bin/true\\x00'",
        ),
        ({"daemon": {"metrics_host": "127.0.0.1\u0000"}}, "daemon.metrics_host: '127.0.0.1"),
        ({"windows": {"scope": "\u2028"}}, "windows.scope: '\\u2028' holds a control"),
        ({"pools": {"pool\n": {}}}, "pools.(key): 'pool\\n' holds a control character"),
    ],
)
def test_settings_the_schema_let_through_are_refused_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, document: object, fragment: str
) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(document))
    status, line = _one_line(capsys, "plan", "--snapshot", str(EXAMPLE), "--settings", str(path))
    assert status == 2
    assert fragment in line, line


def test_the_2019_key_of_the_api_server_is_checked_too() -> None:
    with pytest.raises(InputError, match=r"kubernetes\.api_server: 'ldap://dc\.example' is not"):
        settings_from_dict({"kubernetes_api": "ldap://dc.example"})


def test_a_schema_pattern_ending_in_dollar_means_the_end_of_the_text() -> None:
    """ECMA-262's ``$``, not Python's (which also matches before a final newline)."""
    errors = list(validator().iter_errors({"execute": {"label_prefix": "tuner.dev\n"}}))
    assert [e.validator for e in errors] == ["pattern"]
    assert not list(validator().iter_errors({"execute": {"label_prefix": "tuner.dev"}}))


def test_multi_line_settings_keep_their_lines_but_never_a_nul() -> None:
    query = "sum by (service) (\n  rate(http_requests_total[$window])\n)"
    command = ["sh", "-c", "echo one\necho two"]
    settings = settings_from_dict(
        {"load": {"query": query}, "execute": {"node_removal_command": command}}
    )
    assert settings.load.query == query
    assert settings.execute.node_removal_command == tuple(command)
    with pytest.raises(InputError, match=r"load\.query: .* holds a control character"):
        settings_from_dict({"load": {"query": "up\x00"}})


def test_a_url_with_credentials_and_a_path_prefix_is_accepted() -> None:
    settings = settings_from_dict(
        {
            "prometheus": {"url": "https://user:p%23ss@prom.example:9090/prometheus"},
            "kubernetes": {"api_server": "https://[::1]:6443/k8s/clusters/c-1"},
        }
    )
    assert settings.kubernetes.api_server == "https://[::1]:6443/k8s/clusters/c-1"


# --- secrets and control characters printed by tuner monitor --------------------------------


@pytest.mark.parametrize(
    ("user", "password"),
    [("admin", "p@ssB"), ("admin", "pa ssC"), ("admin", "pa%20ssD"), ("admin", "S3cret%23G")],
)
def test_monitor_with_prometheus_down_never_prints_the_password(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, user: str, password: str
) -> None:
    """Nothing listens on port 9 (discard)."""
    url = f"http://{user}:{password}@127.0.0.1:9"
    settings = tmp_path / "settings.json"
    document = {"prometheus": {"url": url, "timeout_s": 2}, "load": {"query": "vector(1)"}}
    settings.write_text(json.dumps(document))
    for output in ("text", "json"):
        main(["monitor", "--settings", str(settings), "--format", output])
        out, err = capsys.readouterr()
        printed = out + err
        plain = password.replace("%20", " ").replace("%23", "#")
        for secret in (password, plain, plain[-3:], user):  # "***@ssB@" was printed once
            assert secret not in printed, printed
        assert "127.0.0.1:9" in printed


def test_a_password_with_a_hash_is_refused_without_printing_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"prometheus": {"url": "http://admin:S3cret#G@127.0.0.1:9"}}))
    status, line = _one_line(capsys, "monitor", "--settings", str(settings))
    assert status == 2
    assert "S3cret" not in line and "admin" not in line
    assert "must be percent-encoded" in line


def test_daemon_log_lines_are_one_line_without_credentials(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``tuner run`` sets its own log handler: it redacts and escapes like the command line's."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        for json_lines in (False, True):
            logs.configure(verbose=False, json_lines=json_lines)
            log = logging.getLogger("tuner.daemon")
            log.warning("query to %s failed: \x1b[2Jforged\nline", "http://u:hunter2@prom:9090/x")
            try:
                raise OSError("connect to bolt://neo4j:s3cret@db:7687 refused")
            except OSError:
                log.exception("knowledge base down")
            err = capsys.readouterr().err
            assert "hunter2" not in err and "s3cret" not in err
            first = json.loads(err.splitlines()[0])["message"] if json_lines else err
            assert "http://***@prom:9090/x" in first and "\\x1b[2Jforged\\nline" in first
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_a_one_line_error_is_cut_in_the_middle(capsys: pytest.CaptureFixture[str]) -> None:
    _fail("start " + "x" * 10_000 + " end")
    line = capsys.readouterr().err.rstrip("\n")
    assert line.startswith("tuner: error: start ") and line.endswith(" end")
    assert len(line) < 2100 and "characters) ..." in line


def test_a_device_is_not_read_as_an_input_file() -> None:
    with pytest.raises(InputError, match="settings /dev/zero is a device, not a file"):
        read_json("/dev/zero", "settings")


HOSTILE_LABELS = ("web\x1b[2J\x1b[31m", "api\rverdict:  stable", "db\u2028act: yes", "bell\x07")


def test_monitor_escapes_control_characters_of_label_values_and_errors() -> None:
    report = WindowReport(
        verdict=Verdict.UNKNOWN,
        reason="Prometheus refused the query: bad_data: \x1b]0;pwned\x07\r\nverdict: stable",
        load=Load.vector(dict.fromkeys(HOSTILE_LABELS, 1.0)),
        start=1_700_000_000.0,
        end=1_700_000_600.0,
        checked_from=1_700_000_000.0,
        findings=("node n\u20283 appeared", "pending pods: shop/\x1bweb-1"),
        load_query="sum by (service) (rate(x[600s]))",
    )
    text = render_text(report)
    assert all(line.isprintable() for line in text.splitlines())
    assert len(text.splitlines()) == 9 + len(HOSTILE_LABELS) + 2  # not one line more
    assert "web\\x1b[2J\\x1b[31m" in text and "db\\u2028act: yes" in text
    assert "\\x1b]0;pwned\\x07\\r\\nverdict: stable" in text


# --- hostile Prometheus answers -------------------------------------------------------------


@pytest.fixture
def hostile() -> Iterator[RawAnswers]:
    with raw_answers() as server:
        yield server


def _answer(result: str) -> bytes:
    return (
        '{"status": "success", "data": {"resultType": "vector", "result": ' + result + "}}"
    ).encode()


DIGITS = "9" * 401


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (200, _answer('[{"metric": {}, "value": [' + DIGITS + ', "1"]}]'), "unexpected sample"),
        (200, _answer('[{"metric": {}, "value": [1.7e9, ' + DIGITS + "]}]"), "unexpected sample"),
        (200, _answer("[" * 200_000 + "]" * 200_000), "nested too deep"),
        (400, b"[" * 200_000 + b"]" * 200_000, r"refused the query: HTTP 400: \[\[\["),
    ],
)
def test_a_hostile_prometheus_answer_is_a_query_error(
    hostile: RawAnswers, status: int, body: bytes, message: str
) -> None:
    hostile.status, hostile.body = status, body
    url = hostile.url
    with PrometheusClient(Prometheus(url=url)) as client:
        with pytest.raises(QueryError, match=message):
            client.instant("sum(up)", 1.7e9)
        with pytest.raises(QueryError):
            client.range("sum(up)", 1.7e9, 1.7e9 + 10, 5)


def test_a_401_digit_value_string_is_infinite_not_a_crash(hostile: RawAnswers) -> None:
    hostile.body = _answer('[{"metric": {"a": "b"}, "value": [1.7e9, "' + DIGITS + '"]}]')
    url = hostile.url
    with PrometheusClient(Prometheus(url=url)) as client:
        answer = client.instant("sum(up)", 1.7e9)
    assert not isinstance(answer, float) and answer[0].points[0][1] == float("inf")


# --- dumps and live objects of the wrong shape ----------------------------------------------

NODE: dict[str, Any] = {
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"zone": "a"}, "annotations": {"note": "x"}},
    "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
    "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
}
POD: dict[str, Any] = {
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "shop", "labels": {"app": "web"}},
    "spec": {
        "nodeName": "n1",
        "containers": [{"resources": {"requests": {"cpu": "100m"}}}],
        "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}],
        "nodeSelector": {"zone": "a"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "kubernetes.io/hostname",
                        "namespaces": ["shop"],
                    }
                ]
            },
        },
    },
    "status": {"phase": "Running"},
}
PDB: dict[str, Any] = {
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "b", "namespace": "shop"},
    "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["w"]}]}},
    "status": {"disruptionsAllowed": 1},
}
HPA: dict[str, Any] = {
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "h", "namespace": "shop"},
    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3},
}


def _required(pod: dict[str, Any]) -> dict[str, Any]:
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    return terms["nodeSelectorTerms"][0]["matchExpressions"][0]  # type: ignore[no-any-return]


def _anti(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["spec"]["affinity"]["podAntiAffinity"][  # type: ignore[no-any-return]
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0]


Mutation = Callable[[dict[str, dict[str, Any]]], None]

WRONG_SHAPES: dict[str, tuple[Mutation, str]] = {
    "nodeSelector value": (
        lambda o: o["pod"]["spec"]["nodeSelector"].update(zone=["a"]),
        "spec.nodeSelector is not a map of strings",
    ),
    "toleration key": (
        lambda o: o["pod"]["spec"]["tolerations"][0].update(key=["k"]),
        "spec.tolerations[0].key is ['k'], not a string",
    ),
    "toleration value": (
        lambda o: o["pod"]["spec"]["tolerations"][0].update(value={"v": 1}),
        "spec.tolerations[0].value is {'v': 1}, not a string",
    ),
    "matchExpressions key": (
        lambda o: _required(o["pod"]).update(key=["zone"]),
        "matchExpressions[0].key is ['zone'], not a string",
    ),
    "matchExpressions values": (
        lambda o: _required(o["pod"]).update(values=[["a"]]),
        "matchExpressions[0].values[0] is ['a'], not a string",
    ),
    "anti-affinity matchLabels value": (
        lambda o: _anti(o["pod"])["labelSelector"]["matchLabels"].update(app=["web"]),
        "labelSelector.matchLabels is not a map of strings",
    ),
    "anti-affinity namespaces": (
        lambda o: _anti(o["pod"]).update(namespaces=[["shop"]]),
        "namespaces[0] is ['shop'], not a string",
    ),
    "taint key": (
        lambda o: o["node"]["spec"]["taints"][0].update(key=["k"]),
        "spec.taints[0].key is ['k'], not a string",
    ),
    "taints not a list": (
        lambda o: o["node"]["spec"].update(taints={"key": "k"}),
        "spec.taints is {'key': 'k'}, not a list of objects",
    ),
    "unschedulable as a string": (
        lambda o: o["node"]["spec"].update(unschedulable="false"),
        "spec.unschedulable is 'false', not true or false",
    ),
    "phase": (
        lambda o: o["pod"]["status"].update(phase=["Running"]),
        "status.phase is ['Running'], not a string",
    ),
    "PDB selector expression values": (
        lambda o: o["pdb"]["spec"]["selector"]["matchExpressions"][0].update(values="w"),
        "spec.selector.matchExpressions[0].values is 'w', not a list of strings",
    ),
    "HPA target name": (
        lambda o: o["hpa"]["spec"]["scaleTargetRef"].update(name={"n": 1}),
        "spec.scaleTargetRef.name is {'n': 1}, not a string",
    ),
}


def _objects(mutation: Mutation) -> list[dict[str, Any]]:
    objects = {"node": copy.deepcopy(NODE), "pod": copy.deepcopy(POD)}
    objects |= {"pdb": copy.deepcopy(PDB), "hpa": copy.deepcopy(HPA)}
    mutation(objects)
    second = copy.deepcopy(NODE)
    second["metadata"]["name"] = "n2"
    return [objects["node"], second, objects["pod"], objects["pdb"], objects["hpa"]]


def test_the_objects_of_the_right_shape_parse() -> None:
    cluster = cluster_from_objects(_objects(lambda _o: None))
    assert [p.name for p in cluster.pods] == ["p"] and len(cluster.nodes) == 2


@pytest.mark.parametrize("case", sorted(WRONG_SHAPES))
def test_a_dump_of_the_wrong_shape_is_one_line_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str
) -> None:
    mutation, fragment = WRONG_SHAPES[case]
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"items": _objects(mutation)}))
    status, line = _one_line(capsys, "plan", "--snapshot", str(dump))
    assert status == 2
    assert fragment in line, line


@pytest.mark.parametrize("case", sorted(WRONG_SHAPES))
def test_a_live_object_of_the_wrong_shape_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture, case: str
) -> None:
    """Kubernetes' own validation never lets such an object in; the parsers still skip it."""
    mutation, fragment = WRONG_SHAPES[case]
    with caplog.at_level(logging.WARNING):
        cluster = cluster_from_objects(_objects(mutation), strict=False)
    assert fragment in caplog.text
    assert "n2" in [n.name for n in cluster.nodes]  # the rest is still read

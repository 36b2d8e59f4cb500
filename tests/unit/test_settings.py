"""settings.json: schema validation naming the bad field, defaults, and the 2019 flat keys."""

import json
import logging
from fractions import Fraction
from pathlib import Path

import pytest

from tuner.errors import InputError
from tuner.settings import Settings, load_settings, settings_from_dict

ROOT = Path(__file__).parents[2]


def test_defaults_without_a_file() -> None:
    settings = load_settings(None)
    assert settings == Settings()
    assert settings.knowledge.backend == "embedded"
    assert settings.knowledge.lookup_limit == 10
    assert settings.analyse.thresholds.cpu is None


def test_shipped_examples_load() -> None:
    example = load_settings(ROOT / "settings" / "example.json")
    assert example.analyse.thresholds.cpu == Fraction(4, 5)
    assert example.analyse.usability.min_memory == 128 * 2**20
    assert example.analyse.usability.max_cpu_to_memory == Fraction(8, 5)
    assert example.pricing.node_types["e2-standard-4"] == pytest.approx(0.134012)


def test_legacy_flat_keys_are_mapped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        settings = load_settings(ROOT / "settings" / "legacy-2019.json")
    assert settings.windows.measure_s == 600
    assert settings.windows.retry_s == 60
    assert settings.windows.warmup_s == 120
    assert settings.pricing.price_per_core == 0.0316
    assert settings.load.delta == 0.1
    assert settings.load.pod_name == "php-apache"
    assert settings.prometheus.url == "http://127.0.0.1:9090"
    assert settings.kubernetes.api_server == "https://127.0.0.1:6443"
    assert settings.analyse.remove_nodes is True
    assert "'measure_window' is deprecated; use windows.measure_s" in caplog.text


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"analyse": {"surprise": 1}}, "analyse: unknown key 'surprise'"),
        ({"bogus": 1}, "(top level): unknown key 'bogus'"),
        (
            {"analyse": {"thresholds": {"cpu": 1.5}}},
            "analyse.thresholds.cpu: 1.5 is greater than the maximum of 1",
        ),
        (
            {"analyse": {"max_parallel_removals": 0}},
            "analyse.max_parallel_removals: 0 is less than the minimum of 1",
        ),
        (
            {"pricing": {"node_types": {"x": -1}}},
            "pricing.node_types.x: -1 is less than the minimum of 0",
        ),
        ({"knowledge": {"backend": "mysql"}}, "knowledge.backend: 'mysql' is not one of"),
        (
            {"knowledge": {"lookup_limit": 0}},
            "knowledge.lookup_limit: 0 is less than the minimum of 1",
        ),
        ({"load": {"delta": "0.1"}}, "load.delta: '0.1' is not of type 'number'"),
        (
            {"analyse": {"usability": {"min_cpu": "fast"}}},
            "analyse.usability: invalid quantity 'fast'",
        ),
        ({"execute": {"node_removal": "command"}}, "execute.node_removal_command: required"),
        ({"execute": {"node_provision": "command"}}, "execute.node_provision_command: required"),
        ({"execute": {"node_provision": "karpenter"}}, "execute.node_provision: 'karpenter' is"),
        (
            {"execute": {"provision_timeout_s": 0}},
            "execute.provision_timeout_s: 0 is less than or equal to the minimum of 0",
        ),
        ([], "must be a JSON object"),
    ],
)
def test_bad_settings_name_the_field(document: object, message: str) -> None:
    with pytest.raises(InputError) as error:
        settings_from_dict(document)
    assert message in str(error.value)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "s.json"
    bad.write_text("{,}")
    with pytest.raises(InputError, match=r"settings .*s.json is not valid JSON"):
        load_settings(bad)
    bad.write_text(json.dumps({"load": {"delta": 2}}))
    with pytest.raises(InputError, match=r"settings .*s.json: load.delta"):
        load_settings(bad)


def test_secrets_are_only_named_never_stored() -> None:
    with pytest.raises(InputError, match="unknown key 'password'"):
        settings_from_dict({"knowledge": {"password": "hunter2"}})
    assert (
        settings_from_dict({"knowledge": {"password_env": "MY_PW"}}).knowledge.password_env
        == "MY_PW"
    )

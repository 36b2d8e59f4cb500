"""Load extraction: the configured query, the thesis' default, and comparing loads."""

from __future__ import annotations

import math

import pytest

from tuner.errors import InputError
from tuner.model.load import Load, load_from_json
from tuner.monitor.load import (
    LoadError,
    load_from_scalar,
    load_from_vector,
    load_query,
    pod_name_query,
    render_query,
)
from tuner.monitor.series import series
from tuner.settings import LoadSettings, settings_from_dict

THESIS = 'sum(rate(container_network_receive_bytes_total{pod=~"php-apache.*"}[$window]))'


def test_the_2019_pod_name_key_gives_the_thesis_query() -> None:
    settings = settings_from_dict({"load_pod_name": "php-apache"})
    assert load_query(settings.load) == THESIS
    assert render_query(load_query(settings.load), 600) == THESIS.replace("$window", "600s")


def test_a_configured_query_wins_over_the_pod_name() -> None:
    settings = LoadSettings(query="sum(rate(http_requests_total[$window]))", pod_name="web")
    assert load_query(settings) == "sum(rate(http_requests_total[$window]))"


def test_pod_name_prefix_is_matched_literally() -> None:
    assert pod_name_query("web.v2") == (
        'sum(rate(container_network_receive_bytes_total{pod=~"web\\\\.v2.*"}[$window]))'
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (LoadSettings(), "load.query is not set"),
        (LoadSettings(query="  "), "load.query: must not be empty"),
        (LoadSettings(pod_name=""), "load.pod_name: must not be empty"),
    ],
)
def test_missing_load_query_is_bad_settings(settings: LoadSettings, message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_query(settings)


@pytest.mark.parametrize(
    ("seconds", "duration"), [(600, "600s"), (22.5, "22500ms"), (0.0001, "1ms"), (15.0, "15s")]
)
def test_window_is_rendered_as_a_promql_duration(seconds: float, duration: str) -> None:
    query = 'rate(x{pod=~"web$"}[$window]) / rate(y[$window])'
    assert render_query(query, seconds) == (
        f'rate(x{{pod=~"web$"}}[{duration}]) / rate(y[{duration}])'
    )


def test_one_unlabelled_series_is_a_scalar_load() -> None:
    load = load_from_vector([series({}, (1.0, 1234.5))])
    assert load.is_scalar
    assert load.total == 1234.5
    assert load.to_json() == 1234.5
    assert load_from_scalar(7.0) == Load.scalar(7.0)


def test_labelled_series_are_a_load_vector() -> None:
    load = load_from_vector(
        [
            series({"service": "web", "namespace": "shop"}, (1.0, 100.0)),
            series({"service": "api", "namespace": "shop"}, (1.0, 30.0)),
        ]
    )
    assert not load.is_scalar
    assert load.to_json() == {
        '{namespace="shop",service="api"}': 30.0,
        '{namespace="shop",service="web"}': 100.0,
    }
    assert load.total == 130.0
    assert load_from_json(load.to_json()) == load


@pytest.mark.parametrize(
    ("value", "message"),
    [(math.nan, "NaN"), (math.inf, "infinite"), (-1.0, "negative")],
)
def test_unusable_values_are_load_errors(value: float, message: str) -> None:
    with pytest.raises(LoadError, match=message):
        load_from_vector([series({"service": "web"}, (1.0, 1.0)), series({}, (1.0, value))])
    with pytest.raises(LoadError, match=message):
        load_from_scalar(value)


def test_an_empty_answer_is_a_load_error_that_says_how_to_allow_zero() -> None:
    with pytest.raises(LoadError, match=r"returned no series .*or vector\(0\)"):
        load_from_vector([])


def test_scalar_loads_compare_within_delta_of_the_current_load() -> None:
    current = Load.scalar(3000.0)
    assert current.within(Load.scalar(2700.0), 0.1)
    assert current.within(Load.scalar(3300.0), 0.1)
    assert not current.within(Load.scalar(3301.0), 0.1)
    assert not current.within(Load.scalar(2699.0), 0.1)


def test_vector_loads_compare_per_dimension() -> None:
    current = Load.vector({"web": 1000.0, "api": 10.0})
    # The total is within 10 %, but api doubled: not the same load.
    other = Load.vector({"web": 990.0, "api": 20.0})
    assert abs(other.total - current.total) <= 0.1 * current.total
    assert not current.within(other, 0.1)
    assert current.outside(other, 0.1) == ("api",)
    assert current.within(Load.vector({"web": 1050.0, "api": 9.5}), 0.1)


def test_a_missing_dimension_counts_as_zero() -> None:
    current = Load.vector({"web": 1000.0, "batch": 0.0})
    assert current.within(Load.vector({"web": 1000.0}), 0.1)
    assert not current.within(Load.vector({"web": 1000.0, "batch": 5.0}), 0.1)
    assert not Load.scalar(1000.0).within(Load.vector({"web": 1000.0}), 0.1)


def test_a_load_is_finite_and_not_negative() -> None:
    with pytest.raises(ValueError, match="finite"):
        Load.scalar(-1.0)
    with pytest.raises(ValueError, match="at least one"):
        Load.vector({})

"""Every Kubernetes quantity form parses exactly into integers."""

import pytest

from tuner.errors import InputError
from tuner.model.quantity import cpu_millis, format_cpu, format_memory, memory_bytes


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("100m", 100),
        ("0.5", 500),
        ("2", 2000),
        ("1.5", 1500),
        (".25", 250),
        ("250000u", 250),
        ("1e-1", 100),
        ("1k", 1_000_000),
        (3, 3000),
        (0.1, 100),
        ("1n", 1),  # Kubernetes rounds CPU up to the next millicore
    ],
)
def test_cpu_forms(text: str | int | float, millis: int) -> None:
    assert cpu_millis(text) == millis


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Gi", 2**30),
        ("1G", 10**9),
        ("1e9", 10**9),
        ("512Ki", 512 * 1024),
        ("1.5Gi", 3 * 2**29),
        ("128974848", 128974848),
        ("129M", 129_000_000),
        ("123Mi", 123 * 2**20),
        ("1E3", 1000),
        ("2Ti", 2 * 2**40),
        ("0.5Ki", 512),
        ("+1k", 1000),
    ],
)
def test_memory_forms(text: str, value: int) -> None:
    assert memory_bytes(text) == value


@pytest.mark.parametrize(
    "bad", ["", "abc", "1.2.3", "1Gb", "12 Mi", "1e", "--1", True, float("nan")]
)
def test_invalid_quantities_are_input_errors(bad: object) -> None:
    with pytest.raises(InputError, match="invalid quantity"):
        cpu_millis(bad)  # type: ignore[arg-type]


def test_results_are_integers() -> None:
    assert isinstance(cpu_millis("0.3333"), int)
    assert cpu_millis("0.3333") == 334  # rounded up, never a float


def test_formatting_round_trips() -> None:
    assert format_cpu(2000) == "2"
    assert format_cpu(250) == "250m"
    assert format_memory(2**30) == "1Gi"
    assert memory_bytes(format_memory(1536 * 2**10)) == 1536 * 2**10

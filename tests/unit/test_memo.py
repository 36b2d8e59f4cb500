"""Memoising pure functions of arrays by value."""

from __future__ import annotations

import numpy as np

from tuner.model.memo import by_value


def test_an_equal_array_gets_the_kept_result_and_another_is_computed() -> None:
    calls: list[float] = []

    @by_value(2)
    def total(values: np.ndarray, scale: float) -> float:
        calls.append(scale)
        return float(np.nansum(values)) * scale

    a = np.array([1.0, np.nan, 2.0])
    assert total(a, 2.0) == 6.0
    assert total(a.copy(), 2.0) == 6.0
    assert calls == [2.0]
    assert total(a, 3.0) == 9.0
    assert total(np.array([1.0, 0.0, 2.0]), 2.0) == 6.0  # NaN and 0 told apart
    assert total(np.array([-0.0, np.nan, 2.0]), 2.0) == 4.0
    assert len(calls) == 4
    total(a, 2.0)  # the oldest was dropped (two kept)
    assert len(calls) == 5

"""Memoising a pure function of arrays by the arguments' values (:func:`by_value`): a forecast
asked again of the same series, at the same step, is not computed twice."""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import ParamSpec, TypeVar

import numpy as np

P = ParamSpec("P")
R = TypeVar("R")


def by_value(size: int) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A decorator keeping the last ``size`` results of a pure function, each for its
    arguments' values: an array by its dtype, shape and bytes (bit for bit: NaN and -0.0 are
    told apart as computation would), anything else as it compares. The function must not
    mutate its arguments, nor its callers the result."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        kept: OrderedDict[Hashable, R] = OrderedDict()

        @functools.wraps(function)
        def memoised(*args: P.args, **kwargs: P.kwargs) -> R:
            key = (tuple(map(_key, args)), tuple((k, _key(v)) for k, v in sorted(kwargs.items())))
            if key in kept:
                kept.move_to_end(key)
                return kept[key]
            result = function(*args, **kwargs)
            kept[key] = result
            if len(kept) > size:
                kept.popitem(last=False)
            return result

        return memoised

    return decorate


def _key(value: object) -> Hashable:
    if isinstance(value, np.ndarray):
        return (np.ndarray, value.dtype.str, value.shape, value.tobytes())
    return (type(value), value)

"""Hypothesis strategies of hostile values, each invalid by construction (never an accident of
the code under test)."""

from __future__ import annotations

from hypothesis import strategies as st

NOT_FINITE = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
"""JSON number literals that are not finite numbers (written raw into the document)."""

NEGATIVE = st.floats(max_value=-1e-6, allow_nan=False, allow_infinity=False).map(repr)
"""A negative number."""

HUGE_INT = st.integers(min_value=2**63, max_value=10**200).map(str)
"""An integer beyond int64 (and every bound the inputs allow)."""

HUGE = st.floats(min_value=1e16, max_value=1e300).map(repr) | HUGE_INT
"""A number above every bound the inputs allow."""

WRONG_TYPE = st.sampled_from(['"12"', "true", "null", "[]", "{}", '{"a": 1}', '"NaN"'])
"""A JSON value of the wrong type for a number."""

BAD_NUMBER = NOT_FINITE | NEGATIVE | HUGE | WRONG_TYPE

NO_DIGITS = st.text(
    alphabet=st.characters(blacklist_categories=("Nd", "Cs"), blacklist_characters='"\\'),
    min_size=1,
    max_size=12,
)
"""Text without a single decimal digit: never a quantity, nor a number."""

BAD_QUANTITY = st.one_of(
    st.integers(min_value=31, max_value=10**12).map(lambda e: f"1e{e}"),
    st.sampled_from(["100E", "9Ei", "1e400", "1e999999999", "7Pi", "1e30"]),
    st.integers(min_value=1, max_value=10**9).map(lambda n: f"-{n}"),
    st.integers(min_value=41, max_value=400).map(lambda n: "9" * n),
    NO_DIGITS,
)
"""A Kubernetes quantity text that is malformed, negative or beyond any real node."""

BAD_ARGUMENT = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "1e400", "-1", "-0.5", "1e300", "1" * 25]),
    st.integers(min_value=10**13, max_value=10**40).map(str),
    st.integers(min_value=-(10**12), max_value=-1).map(str),
    NO_DIGITS.filter(lambda t: not t.startswith("-") and t.strip()),
)
"""A command-line number no option accepts (``--limit``, ``--keep``, ``--window``, ``--load``,
``--older-than``)."""

"""What the tuner prints of untrusted text: without credentials, on one line.

:func:`printable` escapes control characters (CR, ESC, a line separator) that would end a line
or drive a terminal. Credentials are taken out of URLs by two rules, both linear in the length
of the text:

- after every ``://``, whatever runs up to the last ``@`` before the next ``/`` or whitespace
  is the user information and becomes ``***`` (so ``http://admin:p@ss#1@host/`` loses
  ``admin:p@ss#1``: a parser that splits at the last ``@`` sends all of it as the password);
- the user information of every URL the settings name (:func:`remember_url`) is removed
  wherever it appears, however a library spells the URL it prints (with a space in the
  password, percent-encoded, cut after a ``#``).
"""

from __future__ import annotations

import logging
import re
from functools import cache
from urllib.parse import quote, unquote

_USERINFO = re.compile(r"://[^/\s]*@")
"""From ``://`` to the last ``@`` before a ``/`` or whitespace. Linear: the greedy run stops at
the first ``/`` or whitespace, and the next ``://`` holds a ``/``, so no character is scanned
from two starts."""

_KNOWN: set[str] = set()
"""The user information of the URLs the settings name, in the spellings a library may print."""


def remember_url(url: str) -> None:
    """Redact the user information of ``url`` (a configured URL) from every later message,
    raw, percent-decoded and percent-encoded. Only ``user:password`` counts (a user name
    alone is no secret, and too short a string to take out of every message)."""
    _scheme, sep, rest = url.partition("://")
    userinfo, at, _host = rest.split("/", 1)[0].rpartition("@")
    if not (sep and at and ":" in userinfo):
        return
    plain = unquote(userinfo)
    _KNOWN.update((userinfo, plain, quote(plain, safe=":"), quote(plain, safe=":@")))


def redact_url(text: str) -> str:
    """``text`` with the user information (``user:password``) of every URL in it replaced by
    ``***`` (the user name too: it is half of the credentials)."""
    text = _USERINFO.sub("://***@", text)
    for known in sorted(_KNOWN, key=len, reverse=True):
        text = text.replace(known, "***")
    return text


SHOWN = 120
"""Characters of a value an error message quotes (a 1 MiB key is cut)."""


def shown(value: object) -> str:
    """``repr(value)`` for an error message, cut after :data:`SHOWN` characters."""
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}... ({len(text)} characters)"


def printable(text: str) -> str:
    """``text`` with every character that is not printable (a newline, CR, ESC, BEL, a line
    separator) written as its Python escape, so that it stays one line and drives no
    terminal."""
    if text.isprintable():
        return text
    text = text.translate(_escapes())
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)  # beyond U+FFFF


@cache
def _escapes() -> dict[int, str]:
    """The escape of every character of the Basic Multilingual Plane that is not printable
    (made once, on first need: ~25,000 of them)."""
    return {
        code: repr(char)[1:-1] for code in range(0x10000) if not (char := chr(code)).isprintable()
    }


class RedactingFilter(logging.Filter):
    """A log handler filter: every record it passes is one line without URL credentials (its
    traceback, if any, keeps its lines, without credentials too)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = printable(redact_url(message))
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_url(logging.Formatter().formatException(record.exc_info))
        return True

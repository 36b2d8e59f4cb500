"""Credentials never printed: URLs as they may appear in messages and logs."""

from __future__ import annotations

import logging
import re

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#@\s]*)@")


def redact_url(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it replaced by ``***@`` (the
    user name too: it is half of the credentials)."""
    return _USERINFO.sub(r"\g<scheme>***@", text)


class RedactingFilter(logging.Filter):
    """A log handler filter that redacts URL credentials from every record it passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_url(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True

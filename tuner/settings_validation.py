"""A settings document checked before any value is built from it: against
settings/settings.schema.json (whole numbers written as such, ``$`` meaning the end of the
text as in ECMA-262), every string valid Unicode and, but where a setting may span lines, one
line without control characters, the Prometheus and API server URLs those of an http(s) host
(credentials redacted from every later message).

The flat 2019 keys (``measure_window``, ``price_per_core``, ...) still load: they are mapped
onto the nested keys with a deprecation warning.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import Iterator
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

import jsonschema

from tuner.errors import InputError
from tuner.redact import redact_url, remember_url, shown

log = logging.getLogger(__name__)

SCHEMA = resources.files("tuner") / "settings.schema.json"
"""settings/settings.schema.json, shipped inside the package (a link in the source tree)."""

LEGACY_KEYS: dict[str, tuple[str, str]] = {
    "measure_window": ("windows", "measure_s"),
    "retry_window": ("windows", "retry_s"),
    "warmup_time": ("windows", "warmup_s"),
    "price_per_core": ("pricing", "price_per_core"),
    "price_per_gb": ("pricing", "price_per_gb"),
    "load_delta": ("load", "delta"),
    "migration_chance": ("analyse", "migration_chance"),
    "remove_nodes": ("analyse", "remove_nodes"),
    "prometheus_address": ("prometheus", "url"),
    "kubernetes_api": ("kubernetes", "api_server"),
    "load_pod_name": ("load", "pod_name"),
}


MULTI_LINE = frozenset(
    {
        ("load", "query"),
        ("execute", "node_removal_command"),
        ("execute", "node_provision_command"),
    }
)
"""Settings whose strings may span lines (PromQL, a script given to ``sh -c``): only NUL is
refused in them. Every other settings string is one line, without control characters."""

_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _is_integer(_checker: Any, instance: object) -> bool:
    """JSON Schema's ``integer`` counts ``2.0``; the settings take whole numbers written as such
    (``2.0`` is refused, not turned into a float that fails later)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def _ecma(pattern: str) -> re.Pattern[str]:
    """A schema ``pattern`` compiled with ECMA-262's meaning of ``$`` (the end of the text),
    not Python's (also before a final newline, so ``"tuner.dev\\n"`` would pass)."""
    out, in_class, escaped = [], False, False
    for char in pattern:
        end = char == "$" and not (escaped or in_class)
        if not escaped:
            in_class = (in_class or char == "[") and char != "]"
        escaped = not escaped and char == "\\"
        out.append("\\Z" if end else char)
    return re.compile("".join(out))


def _pattern(
    validator: Any, pattern: str, instance: object, _schema: Any
) -> Iterator[jsonschema.ValidationError]:
    if validator.is_type(instance, "string") and not _ecma(pattern).search(str(instance)):
        yield jsonschema.ValidationError(f"{shown(instance)} does not match {pattern!r}")


@cache
def validator() -> jsonschema.Draft202012Validator:
    """The schema's validator, with the settings' own ``integer`` and ``pattern``."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    base = jsonschema.Draft202012Validator
    strict = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        base,
        validators={"pattern": _pattern},
        type_checker=base.TYPE_CHECKER.redefine("integer", _is_integer),
    )
    return strict(schema)  # type: ignore[no-any-return]


def validated(document: Any) -> dict[str, Any]:
    """The document once checked, with the legacy keys mapped onto the nested ones (the first
    problem is an :class:`~tuner.errors.InputError` naming the setting and its value)."""
    if not isinstance(document, dict):
        raise InputError("must be a JSON object")
    _check_strings(document, ())
    error = next(iter(sorted(validator().iter_errors(document), key=lambda e: e.path)), None)
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        raise InputError(f"{where}: {_message(error)}")
    doc = _map_legacy(document)
    for section, key in (("prometheus", "url"), ("kubernetes", "api_server")):
        url = doc.get(section, {}).get(key)
        if url is not None:
            _http_url(f"{section}.{key}", url)
    remember_url(doc.get("knowledge", {}).get("uri", ""))
    return doc


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties" and isinstance(error.schema, dict):
        known: dict[str, Any] = error.schema.get("properties", {})
        instance: dict[str, Any] = error.instance if isinstance(error.instance, dict) else {}
        extra = sorted(set(instance) - set(known))
        return f"unknown key {shown(extra[0])}" if extra else error.message
    if error.validator == "type":
        return f"{shown(error.instance)} is not of type {error.validator_value!r}"
    return error.message


def _check_strings(value: Any, path: tuple[str, ...]) -> None:
    """Every string of the document (keys too) is valid Unicode (no lone surrogate such as
    ``"\\ud800"``) without NUL; outside :data:`MULTI_LINE` it is one line, without control
    characters."""
    where = ".".join(path) or "(top level)"
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise InputError(f"{where}: {shown(value)} is not valid Unicode (a lone surrogate)")
        bad = "\x00" in value or (path[:2] not in MULTI_LINE and _CONTROL.search(value))
        if bad:
            raise InputError(f"{where}: {shown(value)} holds a control character")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(key, (*path, "(key)"))
            _check_strings(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_strings(item, (*path, str(index)))


def _http_url(where: str, url: str) -> None:
    """An ``http://`` or ``https://`` URL of a host (an optional port and path prefix, no query
    or fragment); its credentials, if any, are redacted from every later message."""
    remember_url(url)
    try:
        parts = urlsplit(url)
        host, _port = parts.hostname, parts.port
        if host and ":" in host:
            ipaddress.IPv6Address(host.split("%")[0])
    except ValueError as err:  # its text may quote a part of the password: left out then
        problem, split = ("not a URL" if "@" in url else f"not a URL ({err})"), True
    else:
        plain = host is not None and host.isprintable() and " " not in host
        if plain and parts.scheme in ("http", "https") and not (parts.query or parts.fragment):
            return
        problem = "not an http:// or https:// URL of a host (without query or fragment)"
        split = "@" in parts.path + parts.query + parts.fragment
    hint = (
        "; a '#', '?' or '/' in a password must be percent-encoded" if split and "@" in url else ""
    )
    raise InputError(f"{where}: {shown(redact_url(url))} is {problem}{hint}")


def _map_legacy(document: dict[str, Any]) -> dict[str, Any]:
    doc = {k: dict(v) if isinstance(v, dict) else v for k, v in document.items()}
    for flat, (section, key) in LEGACY_KEYS.items():
        if flat not in doc:
            continue
        value = doc.pop(flat)
        log.warning("settings key %r is deprecated; use %s.%s", flat, section, key)
        doc.setdefault(section, {}).setdefault(key, value)
    return doc

"""The tuner's Neo4j Browser style (``tuner.grass`` beside this file) and GraSS handling.

Browser keeps one style sheet; a sheet given with ``:style`` replaces it entirely, so the base
``node`` and ``relationship`` rules must carry every property (a missing ``font-size`` or
``padding`` crashes the visualisation). :func:`complete` fills them in from Browser 5's own
defaults, so a label rule may name only what it changes.
"""

from __future__ import annotations

from importlib.resources import files

Sheet = dict[str, dict[str, str]]

BASE_RULES: Sheet = {
    "node": {
        "diameter": "50px",
        "color": "#A5ABB6",
        "border-color": "#9AA1AC",
        "border-width": "2px",
        "text-color-internal": "#FFFFFF",
        "font-size": "10px",
    },
    "relationship": {
        "color": "#A5ABB6",
        "shaft-width": "1px",
        "font-size": "8px",
        "padding": "3px",
        "text-color-external": "#000000",
        "text-color-internal": "#FFFFFF",
        "caption": "<type>",
    },
}
"""Neo4j Browser 5's built-in base rules (its GraphStyleModel defaults)."""

_QUOTED = ("caption", "defaultCaption")


def grass() -> str:
    """The text of the shipped style, ``knowledge/browser/tuner.grass``."""
    return files(__package__).joinpath("tuner.grass").read_text(encoding="utf-8")


def parse(text: str) -> Sheet:
    """GraSS text -> ``{selector: {property: value}}``, the JSON Browser stores.

    Mirrors Browser's own parser: quotes (' or ") are dropped and protect the braces of
    captions like ``'{name}'``; whitespace outside rules is ignored.
    """
    bodies: dict[str, str] = {}
    quoted = in_rule = False
    selector = body = ""
    for ch in text:
        if ch in "'\"":
            quoted = not quoted
        elif ch == "{" and not quoted and not in_rule:
            in_rule = True
        elif ch == "}" and not quoted and in_rule:
            bodies[selector] = body
            in_rule, selector, body = False, "", ""
        elif in_rule:
            body += ch
        elif not ch.isspace():
            selector += ch
    sheet: Sheet = {}
    for sel, rule in bodies.items():
        pairs = [part.split(":", 1) for part in rule.split(";")]
        sheet[sel] = {kv[0].strip(): kv[1].strip() for kv in pairs if len(kv) == 2}
    return sheet


def complete(text: str) -> Sheet:
    """Parsed GraSS with the base rules' missing properties filled in."""
    sheet = parse(text)
    if "" in sheet:
        raise ValueError("GraSS has a rule without selector (unbalanced braces?)")
    for selector, defaults in BASE_RULES.items():
        sheet[selector] = {**defaults, **sheet.get(selector, {})}
    return sheet


def one_line(sheet: Sheet) -> str:
    """The sheet as one line of GraSS (captions quoted with ', which Browser strips)."""
    rules = []
    for selector, props in sheet.items():
        body = " ".join(
            f"{key}: '{value}';" if key in _QUOTED else f"{key}: {value};"
            for key, value in props.items()
        )
        rules.append(f"{selector} {{ {body} }}")
    return " ".join(rules)


def style_command(text: str | None = None) -> str:
    """The ``:style ...`` command that applies a style (default: the tuner's) in Browser.

    One line: typed with newlines, Browser's editor auto-closes ``{`` and breaks the sheet.
    """
    return ":style " + one_line(complete(grass() if text is None else text))


def label_colours(text: str | None = None) -> dict[str, str]:
    """Vertex label -> fill colour (upper case) of the ``node.Label`` rules."""
    return {
        sel.split(".", 1)[1]: props["color"].upper()
        for sel, props in parse(grass() if text is None else text).items()
        if sel.startswith("node.") and "color" in props
    }

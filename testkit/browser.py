"""Drive Neo4j Browser in headless Chromium (Debian's, through the PyPI ``playwright`` package).

Never ``playwright install``: Chromium comes from ``scripts/chromium.sh install`` and is
launched with ``executable_path``; its flags come from ``scripts/chromium.sh flags``.

Usage::

    with neo4j_browser(http_url) as browser:
        browser.connect(bolt_uri, user, password)
        browser.apply_style(style_command())
        frame = browser.run(query)
        nodes = browser.wait_for_graph(frame, count)
        frame.screenshot(path=...)

Selectors are Neo4j Browser 5's (checked against org.neo4j.client:neo4j-browser 5.24.0).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

from playwright.sync_api import Locator, Page, sync_playwright

REPO_ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_SCRIPT = REPO_ROOT / "scripts" / "chromium.sh"

SEL_PASSWORD = '[data-testid="password"]'
SEL_USERNAME = '[data-testid="username"]'
SEL_CONNECT = '[data-testid="connect"]'
SEL_EDITOR = "#monaco-main-editor"  # the Monaco editor at the top
SEL_PROMPT = "#monaco-main-editor .line-numbers"  # "$" disconnected, "neo4j$" connected
SEL_RUN = '[data-testid="editor-Run"]'
SEL_FRAME = '[data-testid="frame"]'  # one per command; newest first
SEL_FRAME_COMMAND = '[data-testid="frameCommand"]'
SEL_GRAPH_NODE = "svg.neod3viz g.node"  # a drawn vertex: circle.b-outline + text.caption
SEL_GRAPH_REL = "svg.neod3viz g.relationship"
SEL_FULLSCREEN = 'button[title="Fullscreen"], button[title="Close fullscreen"]'

CONFIG_COMMAND = (
    ":config {codeFontLigatures: false, allowUserStats: false, allowCrashReports: false}"
)
"""Plain ``->`` arrows in screenshots, no usage reports."""

# True once the drawn vertices have kept their positions for `settled` polls in a row.
_LAYOUT_SETTLED = """([sel, want, settled]) => {
  const nodes = Array.from(document.querySelectorAll(sel));
  if (nodes.length < want) return false;
  const now = nodes.map(n => n.getAttribute('transform')).join('|');
  const state = window.__tunerLayout || (window.__tunerLayout = {last: '', same: 0});
  state.same = now === state.last ? state.same + 1 : 0;
  state.last = now;
  return state.same >= settled;
}"""


@dataclass(frozen=True)
class DrawnVertex:
    """A vertex as Browser drew it."""

    caption: str
    fill: str
    """Fill colour of its circle, upper case (``#4C9A2A``)."""


def chromium_executable() -> str:
    """Debian's Chromium, as ``scripts/chromium.sh path`` reports it."""
    return _chromium_script("path")[0]


def chromium_flags() -> list[str]:
    """Headless, sandbox-less and offline flags (``scripts/chromium.sh flags``)."""
    return _chromium_script("flags")


def _chromium_script(command: str) -> list[str]:
    out = subprocess.run(
        ["bash", str(CHROMIUM_SCRIPT), command],
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
    ).stdout
    return [line for line in out.splitlines() if line.strip()]


class NeoBrowser:
    """One Neo4j Browser tab."""

    def __init__(self, page: Page, http: str, timeout_s: float) -> None:
        self.page = page
        self.http = http.rstrip("/")
        self.timeout_ms = timeout_s * 1000
        page.set_default_timeout(self.timeout_ms)

    def connect(self, uri: str, user: str, password: str) -> None:
        """Open Browser with the connect URL pre-filled and log in with the form."""
        bolt = urlsplit(uri)
        dbms = f"{bolt.scheme}://{quote(user)}@{bolt.hostname}:{bolt.port or 7687}"
        self.page.goto(
            f"{self.http}/browser/?dbms={quote(dbms, safe='')}", wait_until="domcontentloaded"
        )
        self.page.wait_for_selector(SEL_PASSWORD)
        if not self.page.input_value(SEL_USERNAME):
            self.page.fill(SEL_USERNAME, user)
        self.page.fill(SEL_PASSWORD, password)
        self.page.click(SEL_CONNECT)
        # Connected once the editor prompt shows the database name ("neo4j$").
        self.page.wait_for_function(
            "sel => /\\S+\\$/.test(document.querySelector(sel)?.textContent || '')",
            arg=SEL_PROMPT,
        )
        self.run(CONFIG_COMMAND)

    def editor_text(self) -> str:
        """The (one-line) text in the main editor as Monaco renders it."""
        return str(
            self.page.evaluate(
                """sel => Array.from(document.querySelectorAll(sel))
                     .map(l => l.textContent.replace(/\\u00a0/g, ' ')).join('')""",
                SEL_EDITOR + " .view-line",
            )
        )

    def run(self, command: str) -> Locator:
        """Run a one-line command in the main editor; its result frame.

        One line only: on newlines Monaco auto-indents and auto-closes ``{``. insert_text
        puts the line in at once, so brackets and quotes are not auto-closed; the editor
        content is checked before running.
        """
        if "\n" in command:
            raise ValueError("run takes one line; join the lines with spaces")
        self.page.click(SEL_EDITOR)
        self.page.keyboard.press("Control+A")
        self.page.keyboard.press("Delete")
        self.page.keyboard.insert_text(command)
        typed = self.editor_text()
        if typed.strip() != command.strip():
            raise RuntimeError(f"editor holds {typed!r}, expected {command!r}")
        self.page.click(SEL_RUN)
        head = command.strip()[:30]
        frame = (
            self.page.locator(SEL_FRAME)
            .filter(has=self.page.locator(SEL_FRAME_COMMAND, has_text=head))
            .first
        )
        frame.wait_for(state="visible")
        return frame

    def apply_style(self, style_command: str) -> None:
        """Apply a ``:style ...`` command; raises when Browser rejects the sheet."""
        text = self.run(style_command).inner_text()
        if "Could not parse grass" in text or "InvalidGrass" in text:
            raise RuntimeError(f"Browser rejected the style:\n{text[:500]}")

    def wait_for_graph(self, frame: Locator, vertices: int) -> list[DrawnVertex]:
        """Wait until ``vertices`` are drawn in ``frame`` and the force layout has settled."""
        frame.locator(SEL_GRAPH_NODE).nth(vertices - 1).wait_for(state="attached")
        self.page.evaluate("() => { window.__tunerLayout = undefined; }")
        self.page.wait_for_function(_LAYOUT_SETTLED, arg=[SEL_GRAPH_NODE, vertices, 3], polling=250)
        drawn = frame.locator(SEL_GRAPH_NODE).evaluate_all(
            """els => els.map(e => ({
                 caption: Array.from(e.querySelectorAll('text.caption'))
                            .map(t => t.textContent).join(' ').trim(),
                 fill: (e.querySelector('circle.b-outline')?.getAttribute('fill') || '')
                       .toUpperCase()}))"""
        )
        return [DrawnVertex(d["caption"], d["fill"]) for d in drawn]

    def toggle_fullscreen(self, frame: Locator) -> None:
        """Show ``frame`` over the whole page (a graph is then drawn larger), or back."""
        frame.locator(SEL_FULLSCREEN).first.click()

    def relationships(self, frame: Locator) -> int:
        """How many edges are drawn in ``frame``."""
        return frame.locator(SEL_GRAPH_REL).count()


@contextmanager
def neo4j_browser(http: str, timeout_s: float = 60.0) -> Iterator[NeoBrowser]:
    """A fresh headless Chromium profile with one Neo4j Browser tab."""
    with (
        sync_playwright() as playwright,
        tempfile.TemporaryDirectory(prefix="chromium-neo4j-") as profile,
    ):
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=chromium_executable(),
            headless=True,
            args=chromium_flags(),
            viewport={"width": 1400, "height": 900},
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            yield NeoBrowser(page, http, timeout_s)
        finally:
            context.close()

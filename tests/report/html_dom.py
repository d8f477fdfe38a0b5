"""Helpers of the report's browser tests: a just-enough DOM reader, and Debian's ``chromium`` driven through
its own CLI (``--dump-dom``, ``--screenshot``); tests that need it are skipped where it is not on PATH
(CI installs it in ``.ci/run``). ``EVALKIT_ARTIFACTS=<folder>`` keeps the screenshots tests take."""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's `chromium` on PATH "
                                    "(apt-get install chromium; .ci/run installs it)")
ALERT_TRAP = "<script>window.alert=function(m){document.documentElement.setAttribute('data-alerted',String(m));};</script>"


class Dom(HTMLParser):
    """A just-enough DOM reader: tables (rows of cells with data-v and text), links, scripts, text."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[dict[str, str]]]] = {}
        self.heads: dict[str, list[dict[str, str]]] = {}
        self.links: list[str] = []
        self.scripts = 0
        self.text: list[str] = []
        self.root_attrs: dict[str, str] = {}
        self.row_attrs: dict[str, dict[str, str]] = {}
        self.body_rows: dict[str, list[dict[str, str]]] = {}  # each tbody row's attributes, per table id
        self._table: list[str] = []
        self._section = ""
        self._cell: dict[str, str] | None = None
        self._in_script = False
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "html":
            self.root_attrs = a
        elif tag == "script":
            self.scripts += 1
            self._in_script = True
        elif tag == "table":
            self._table.append(a.get("id", ""))
        elif tag in ("thead", "tbody", "tfoot"):
            self._section = tag
        elif tag == "tr" and self._table and self._section == "tbody":
            self.tables.setdefault(self._table[-1], []).append([])
            self.body_rows.setdefault(self._table[-1], []).append(a)
            if a.get("id"):
                self.row_attrs[a["id"]] = a
        elif tag == "tr" and self._table and a.get("id"):
            self.row_attrs[a["id"]] = a
        elif tag in ("td", "th") and self._table:
            self._cell = {"v": a.get("data-v", ""), "key": a.get("data-key", ""), "sort": a.get("aria-sort", ""), "text": ""}
            if self._section == "tbody" and self._table[-1] in self.tables:
                self.tables[self._table[-1]][-1].append(self._cell)
            elif self._section == "thead" and tag == "th":
                self.heads.setdefault(self._table[-1], []).append(self._cell)
        elif tag == "a" and a.get("href"):
            self.links.append(a["href"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False
        elif tag == "table" and self._table:
            self._table.pop()
            self._section = ""
        elif tag in ("td", "th"):
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._in_script:
            return
        self.text.append(data)
        if self._cell is not None:
            self._cell["text"] += data

    def column(self, table: str, key: str) -> list[str]:
        index = [h["key"] for h in self.heads[table]].index(key)
        return [cells[index]["v"] for cells in self.tables[table]]

    def shown(self, table: str) -> list[list[dict[str, str]]]:
        """The table's body rows that are not ``hidden`` (by the filter)."""
        return [cells for cells, attrs in zip(self.tables.get(table, []), self.body_rows.get(table, []))
                if "hidden" not in attrs]

    @property
    def all_text(self) -> str:
        return "".join(self.text)


def chromium(*args: str, profile: Path) -> str:
    command = [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def dump(page: Path, tmp_path: Path, fragment: str = "", size: str = "") -> Dom:
    """The DOM Chromium holds once ``page`` (at ``fragment``) has loaded, in a window of ``size`` ("1400,1000")."""
    window = [f"--window-size={size}"] if size else []
    markup = chromium(*window, "--dump-dom", page.as_uri() + fragment, profile=tmp_path / "profile")
    assert "</html>" in markup, markup[-500:]
    return Dom(markup)


def with_script(page: Path, name: str, head: str = "", tail: str = "") -> Path:
    """A test-only copy of ``page`` beside it, with ``head`` and ``tail`` markup injected."""
    markup = page.read_text(encoding="utf-8")
    copy = page.with_name(name)
    copy.write_text(markup.replace("<head>", "<head>" + head, 1).replace("</body>", tail + "</body>", 1), encoding="utf-8")
    return copy


def screenshot(page: Path, tmp_path: Path, name: str, fragment: str = "", size: str = "1400,1000") -> Path:
    """A PNG of ``page`` (at ``fragment``) in ``tmp_path``; kept in ``$EVALKIT_ARTIFACTS`` when set."""
    shot = tmp_path / name
    chromium(f"--screenshot={shot}", f"--window-size={size}", "--hide-scrollbars", page.as_uri() + fragment,
             profile=tmp_path / "profile")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("EVALKIT_ARTIFACTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    return shot

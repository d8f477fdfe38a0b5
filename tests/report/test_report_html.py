"""The HTML report: rendered from the fixture, then opened in headless Chromium and checked through its DOM.

The browser tests drive Debian's ``chromium`` through its own CLI (``--dump-dom``, ``--screenshot``);
they are skipped where ``chromium`` is not on PATH (CI installs it in ``.ci/run``). Set
``EVALKIT_ARTIFACTS=<folder>`` to keep the screenshot of the front page there.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from html_dom import ALERT_TRAP, Dom, dump, needs_chromium, screenshot, with_script

from evalkit.report.summary import write_reports

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reports" / "results.jsonl"
XSS = "</script><script>alert(1)</script>"
@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    shutil.copy(FIXTURE, folder / "results.jsonl")
    write_reports(folder, problems=["6_extra"])
    return folder


def xss_page(report: Path) -> Path:
    [page] = list((report / "submissions").glob("model-b__3_softmax__1-*.html"))
    return page


def numbers(values: list[str]) -> list[float]:
    return [float(v) for v in values if v != ""]


# --- static checks (no browser) ---------------------------------------------------------------

def test_pages_escape_everything_from_submissions(tmp_path: Path) -> None:
    evil = "<img src=x onerror=alert(2)>"
    row = json.loads(FIXTURE.read_text().splitlines()[10])  # the fixture's XSS submission
    row.update(run=f"run{evil}", problem=f"p{XSS}", sample=f"s{evil}", flags=[evil], warnings=[XSS])
    row["error"] = {"kind": evil, "message": XSS, "traceback": [{"file": evil, "line": 1, "function": XSS,
                                                               "in_submission": True, "text": XSS, "source_line": 9}]}
    row["build"]["log_tail"] = XSS
    (tmp_path / "results.jsonl").write_text(json.dumps(row) + "\n")
    index = write_reports(tmp_path)
    [detail] = list((tmp_path / "submissions").glob("*.html"))
    for page, scripts in ((index, 1), (detail, 0)):
        markup = page.read_text()
        assert markup.count("<script") == scripts, page
        assert "<img" not in markup and "alert(1)</script>" not in markup
        assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in markup
    assert re.fullmatch(r"[A-Za-z0-9._-]+\.html", detail.name)


def detail(report: Path, prefix: str) -> Path:
    [page] = list((report / "submissions").glob(f"{prefix}-*.html"))
    return page


def highlighted(page: Path) -> list[str]:
    dom = Dom(page.read_text())
    return sorted(k for k, a in dom.row_attrs.items() if k.startswith("L") and "hl" in a.get("class", "").split())


def test_detail_pages_number_source_lines_and_highlight_what_errors_point_at(report: Path) -> None:
    assert highlighted(detail(report, "model-b__3_softmax__0")) == ["L23"]  # traceback frame: code line 16 + offset 7
    assert highlighted(detail(report, "model-a__4_conv2d__0")) == ["L14"]   # build error's submission_line
    assert highlighted(detail(report, "model-a__3_softmax__0")) == ["L19"]  # syntax error's source_line
    assert highlighted(detail(report, "model-a__1_matmul__0")) == []
    markup = detail(report, "model-a__1_matmul__0").read_text()
    dom = Dom(markup)
    assert "L8" in dom.row_attrs and "L7" not in dom.row_attrs  # the block starts on line 8 of the answer
    assert [c[-2]["text"] for c in dom.tables["candidates"]] == ["rejected", "chosen"]
    assert markup.count("<svg") == 1 and markup.count("<circle") == 11  # one dot per timed call
    assert "no code extracted" in detail(report, "model-a__2_relu__0").read_text()


def test_summary_and_index_agree(report: Path) -> None:
    summary = json.loads((report / "summary.json").read_text())
    assert summary["summary_schema_version"] == 3
    dom = Dom((report / "index.html").read_text())
    assert len(dom.tables["leaderboard"]) == len(summary["runs"]) == 3
    assert len(dom.tables["submissions"]) == 18
    assert len(dom.tables["problems"]) == summary["problem_set"]["count"] == 6
    assert (report / "index.html").read_text().count("<svg") == 2


# --- in the browser -----------------------------------------------------------------------------

@needs_chromium
def test_index_in_chromium_counts_rows_and_links_resolve(report: Path, tmp_path: Path) -> None:
    dom = dump(report / "index.html", tmp_path)
    assert len(dom.tables["leaderboard"]) == 3
    assert [c[0]["text"] for c in dom.tables["leaderboard"]] == ["model-a", "model-b", "curated"]
    assert len(dom.tables["submissions"]) == 18
    details = [h for h in dom.links if h.startswith("submissions/")]
    assert len(set(details)) == 18
    for href in dom.links:
        parts = urlsplit(href)
        assert not parts.scheme and not parts.netloc, href  # nothing leaves the folder
        if parts.path:
            assert (report / unquote(parts.path)).is_file(), href
    for href in set(details):
        page = report / unquote(href)
        back = [h for h in Dom(page.read_text()).links if not h.startswith("#")]
        assert back and all((page.parent / h).resolve().is_file() for h in back), page


@needs_chromium
def test_hash_sorts_the_submissions_by_speedup(report: Path, tmp_path: Path) -> None:
    before = dump(report / "index.html", tmp_path).column("submissions", "speedup_vs_eager")
    desc = dump(report / "index.html", tmp_path, "#sort=submissions.speedup_vs_eager:desc")
    values = desc.column("submissions", "speedup_vs_eager")
    assert values != before
    assert numbers(values) == sorted(numbers(values), reverse=True) and numbers(values)[0] == 50.0
    assert values[len(numbers(values)):] == [""] * (18 - len(numbers(values)))  # rows without a speedup last
    head = [h for h in desc.heads["submissions"] if h["key"] == "speedup_vs_eager"][0]
    assert head["sort"] == "descending"
    asc = dump(report / "index.html", tmp_path, "#sort=submissions.speedup_vs_eager:asc")
    assert numbers(asc.column("submissions", "speedup_vs_eager")) == sorted(numbers(values))
    assert asc.column("submissions", "speedup_vs_eager")[-1] == ""


@needs_chromium
def test_clicking_a_header_sorts(report: Path, tmp_path: Path) -> None:
    click = ("<script>var t=document.getElementById('leaderboard');"
             "t.querySelector('th[data-key=correct]').click();"
             "document.querySelector('#submissions th[data-key=problem]').click();"
             "document.querySelector('#submissions th[data-key=problem]').click();</script>")
    dom = dump(with_script(report / "index.html", "index-click-test.html", tail=click), tmp_path)
    # one click on a numeric column: highest first (curated 100%, model-a 33.3%, model-b 28.6%)
    assert [c[0]["text"] for c in dom.tables["leaderboard"]] == ["curated", "model-a", "model-b"]
    # two clicks on a text column: ascending, then descending
    problems = [c[1]["text"] for c in dom.tables["submissions"]]
    assert problems == sorted(problems, reverse=True) and problems[0] == "5_layernorm"
    assert [h["sort"] for h in dom.heads["submissions"] if h["key"] == "problem"] == ["descending"]


@needs_chromium
def test_script_in_a_submission_renders_as_text(report: Path, tmp_path: Path) -> None:
    for page in (report / "index.html", xss_page(report)):
        trapped = with_script(page, f"trap-{page.name}", head=ALERT_TRAP)
        dom = dump(trapped, tmp_path)
        assert "data-alerted" not in dom.root_attrs, page
        assert XSS in dom.all_text, page
        assert dom.scripts == (2 if page.name == "index.html" else 1)  # the trap, plus the page's own sorter
    code = "".join(c[1]["text"] for c in dump(xss_page(report), tmp_path).tables.get("code", []))
    assert f"note = '{XSS}'" in code


@needs_chromium
def test_screenshot(report: Path, tmp_path: Path) -> None:
    shot = screenshot(report / "index.html", tmp_path, "report-index.png")
    assert shot.stat().st_size > 20_000

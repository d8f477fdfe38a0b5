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


LONG_RUN = "provider-model-name-2026-11-28-reasoning-high-temperature-0.7-kernelbench-level-1"
LONG_PROBLEM = "conv_transpose3d_square_input_asymmetric_kernel_strided_padded_dilated_grouped"
FITS = ("<script>var width=document.documentElement.clientWidth,out=[];"
        "document.querySelectorAll('table').forEach(function(t){out.push(t.id+':'+Math.ceil(t.getBoundingClientRect().right))});"
        "var details=document.querySelector('#submissions tbody tr td:last-child').getBoundingClientRect().right;"
        "document.documentElement.setAttribute('data-fit',[width,document.documentElement.scrollWidth,Math.ceil(details)]"
        ".concat(out).join(' '));</script>")


def crowded_rows() -> list[dict]:
    """The fixture's rows with everything long that real runs hold: run, problem and sample names, every flag of a
    correct answer, reasons holding paths with no space, levels, and a third run."""
    rows = []
    for i, line in enumerate(FIXTURE.read_text().splitlines()):
        row = json.loads(line)
        row.update(run=row["run"] if row["run"] == "curated" else f"{row['run']}-{LONG_RUN}",
                   problem=f"{row['problem']}_{LONG_PROBLEM}", sample=f"sample_{row['sample']}_of_the_generator_0001",
                   problem_level=1 + i % 3,
                   reason=f"{row.get('reason')} at line 12 of KEEP/corpus/synthetic/{'x' * 160}.py")
        if row["verdict"] == "correct":
            row["flags"] = ["no_custom_kernel", "library_dominated", "reduced_precision", "mutates_inputs"]
        rows += [row, {**row, "run": f"third-{LONG_RUN}"}]
    return rows


@needs_chromium
def test_the_report_fits_a_1400_px_window_whatever_the_names(tmp_path: Path) -> None:
    """Every table of index.html, the submissions table's details column included, within a 1400 px window: long
    names wrap rather than push columns out of sight (the page used to scroll sideways, the details out of view)."""
    folder = tmp_path / "crowded"
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in crowded_rows()))
    page = with_script(write_reports(folder), "index-fit-test.html", tail=FITS)
    width, page_width, details, *tables = dump(page, tmp_path, size="1400,1000").root_attrs["data-fit"].split()
    assert 1300 < int(width) <= 1400  # the window, less any scrollbar
    assert int(page_width) <= int(width), f"the page scrolls sideways: {page_width} px in a {width} px window"
    assert int(details) <= int(width), f"the details column ends at {details} px, past the {width} px window"
    wide = [t for t in tables if int(t.rsplit(":", 1)[1]) > int(width)]
    assert not wide and len(tables) == 6, f"tables past the {width} px window: {wide}"

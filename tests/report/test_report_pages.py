"""What the pages say where the old ones misled: levels, the filter box, "not measured" baselines, the answer
on ``no_code`` pages, tracebacks trimmed to the submission's frames, no error heading without an error.

Static checks read the markup; the browser checks run the page's script in headless Chromium (skipped
without it) and take screenshots (kept in ``$EVALKIT_ARTIFACTS`` when set).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from html_dom import Dom, dump, needs_chromium, screenshot, with_script

from evalkit.intake.extract import extract
from evalkit.report.summary import write_reports
from evalkit.report.text import format_leaderboard
from evalkit.report_folder import ReportFolder
from evalkit.schedule.run_settings import record

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reports" / "results.jsonl"
LEVELS = {"1_matmul": 1, "2_relu": 1, "3_softmax": 1, "4_conv2d": 2, "5_layernorm": 3}
ANSWER = "I cannot write <b>this</b> kernel, sorry.\r\n"  # the file as saved; judged with "\n" line breaks


def fixture_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def write(folder: Path, rows: list[dict[str, Any]], **kwargs: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return write_reports(folder, **kwargs)


def page(folder: Path, prefix: str) -> Path:
    [found] = list((folder / "submissions").glob(f"{prefix}-*.html"))
    return found


@pytest.fixture(scope="module")
def leveled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture report with a KernelBench level on every row."""
    rows = [{**r, "problem_level": LEVELS[r["problem"]]} for r in fixture_rows()]
    return write(tmp_path_factory.mktemp("leveled"), rows, problems=["6_extra"]).parent


@pytest.fixture(scope="module")
def eager_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture report as judged with ``--baselines eager``: no compile baseline anywhere."""
    rows = fixture_rows()
    for r in rows:
        if isinstance(r.get("baselines"), dict):
            r["baselines"].pop("compile")
        r["speedup_vs_compile"] = None
    return write(tmp_path_factory.mktemp("eager"), rows).parent


# --- levels ----------------------------------------------------------------------------------------

def test_index_shows_fast_p_per_level_and_a_level_column(leveled: Path) -> None:
    summary = json.loads((leveled / "summary.json").read_text())
    assert summary["problem_set"]["levels"] == {"1": ["1_matmul", "2_relu", "3_softmax"], "2": ["4_conv2d"],
                                                "3": ["5_layernorm"]}
    dom = Dom((leveled / "index.html").read_text())
    table = dom.tables["levels"]
    assert len(table) == 4 * 3  # (3 runs + overall) x 3 levels
    curated_l1 = next(c for c in table if c[0]["text"] == "curated" and c[1]["text"] == "level 1")
    assert [c["text"] for c in curated_l1[2:]] == ["3", "3", "66.7%", "33.3%", "33.3%", "33.3%"]
    assert [h["key"] for h in dom.heads["submissions"]][:3] == ["run", "problem", "level"]
    assert {a["data-level"] for a in dom.body_rows["submissions"]} == {"1", "2", "3"}
    assert "level 1" in format_leaderboard(summary)


def test_without_levels_there_is_no_level_table(tmp_path: Path) -> None:
    index = write(tmp_path / "r", fixture_rows())
    dom = Dom(index.read_text())
    assert "levels" not in dom.tables and "level" not in [h["key"] for h in dom.heads["submissions"]]
    assert "level" not in format_leaderboard(json.loads((tmp_path / "r" / "summary.json").read_text()))


# --- baselines that were not measured ----------------------------------------------------------------

def test_a_baseline_never_timed_has_no_column_and_reads_not_measured_never_zero(eager_only: Path) -> None:
    dom = Dom((eager_only / "index.html").read_text())
    for table in ("leaderboard", "problems", "submissions"):  # a column would read "not measured" all the way down
        keys = [h["key"] for h in dom.heads[table]]
        assert not [k for k in keys if "compile" in k and k != "compiled"], (table, keys)
        assert [k for k in keys if "eager" in k], (table, keys)
    assert {row[1]["text"] for row in dom.tables["fast-p"]} == {"eager"}
    assert "fast_p vs torch compile: not measured" in (eager_only / "index.html").read_text()
    correct = page(eager_only, "model-a__1_matmul__0").read_text()
    assert "not measured (no compile baseline was timed)" in correct
    text = format_leaderboard(json.loads((eager_only / "summary.json").read_text()))
    assert all("not measured" in line for line in text.splitlines()[2:6])


def test_a_run_answering_one_problem_is_scored_over_it_and_the_page_says_so(tmp_path: Path) -> None:
    """Three samples of one problem, two correct, in a folder of nine problems: the run's pass@1 reads 66.7% beside
    its correct 66.7% (it read 7.4%, scored over all nine), with "1 of 9" problems beside them; overall keeps 9 of 9."""
    matmul = [r for r in fixture_rows() if r["run"] == "model-a" and r["problem"] == "1_matmul"]
    assert [r["verdict"] for r in matmul] == ["correct", "incorrect", "correct"]
    index = write(tmp_path, matmul, problems=[f"{i}_extra" for i in range(8)])
    dom = Dom(index.read_text())
    heads = [h["key"] for h in dom.heads["leaderboard"]]
    [run] = dom.tables["leaderboard"]
    cell = {key: run[heads.index(key)]["text"] for key in ("problems", "correct", "pass_at_1")}
    assert cell == {"problems": "1 of 9", "correct": "66.7% (2)", "pass_at_1": "66.7%"}
    assert "Each run is scored over the problems it answered" in dom.all_text
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["overall"]["problems_scored"] == 9 and summary["runs"]["model-a"]["problems_scored"] == 1


def test_a_report_shows_only_the_baselines_its_run_asked_for_whatever_the_rows_hold(tmp_path: Path) -> None:
    # Rows and baselines.json holding compile figures (an earlier run's, from the machine-wide cache), in a report
    # whose run asked for eager only: compile is not measured there, everywhere.
    rows = [{**r, "problem_level": LEVELS[r["problem"]]} for r in fixture_rows()]
    with ReportFolder.open(tmp_path) as folder:  # as evalkit score does
        record(folder, {"precision": None, "baselines": ["eager"], "device": "cpu", "seed": 1})
    (tmp_path / "baselines.json").write_text(json.dumps({"k": {"problem": "6_extra", "eager": {"median_ms": 1.0},
                                                               "compile": {"median_ms": 2.0}}}))
    write(tmp_path, rows, problems=["6_extra"])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["baselines_asked"] == ["eager"]
    assert summary["overall"]["baselines_not_measured"] == ["compile"]
    assert summary["overall"]["fast_p"]["compile"]["1"] is None
    assert not [p for p, record in summary["baselines"].items() if "compile" in record]
    dom = Dom((tmp_path / "index.html").read_text())
    for table in ("leaderboard", "problems", "submissions", "levels"):
        keys = [h["key"] for h in dom.heads[table]]
        assert not [k for k in keys if "compile" in k and k != "compiled"], (table, keys)
    assert {row[1]["text"] for row in dom.tables["fast-p"]} == {"eager"}


# --- detail pages ------------------------------------------------------------------------------------

def no_code_row(path: str, text: str, sample: str) -> dict[str, Any]:
    row = next(r for r in fixture_rows() if r["verdict"] == "no_code")
    return {**row, "sample": sample, "path": path, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def test_no_code_pages_show_the_answer_escaped_when_its_hash_matches(tmp_path: Path) -> None:
    answer = tmp_path / "answers" / "a.md"
    answer.parent.mkdir()
    answer.write_bytes(ANSWER.encode())
    judged = ANSWER.replace("\r\n", "\n")
    manifest = tmp_path / "answers" / "run.jsonl"
    manifest.write_text(json.dumps({"problem": "2_relu", "text": "first"}) + "\n"
                        + json.dumps({"problem": "2_relu", "text": judged}) + "\n")
    edited = tmp_path / "answers" / "edited.md"
    edited.write_text("edited after judging\n")
    rows = [no_code_row(str(answer), judged, "file"), no_code_row(f"{manifest}:2", judged, "manifest"),
            no_code_row(str(edited), judged, "edited"), no_code_row(str(tmp_path / "gone.md"), judged, "gone"),
            {**no_code_row("nowhere", "x", "inline"), "answer": "<script>alert(1)</script>"}]
    write(tmp_path / "r", rows)
    for sample in ("file", "manifest"):
        markup = page(tmp_path / "r", f"model-a__2_relu__{sample}").read_text()
        assert '<pre class="answer" id="answer">I cannot write &lt;b&gt;this&lt;/b&gt; kernel, sorry.\n</pre>' in markup
        assert "same SHA-256 as judged" in markup
    edited_page = page(tmp_path / "r", "model-a__2_relu__edited").read_text()
    assert 'id="answer"' not in edited_page and "has changed since it was judged" in edited_page
    assert "cannot be read from here" in page(tmp_path / "r", "model-a__2_relu__gone").read_text()
    inline = page(tmp_path / "r", "model-a__2_relu__inline").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in inline and "<script" not in inline


def test_tracebacks_show_the_submissions_frames_and_the_whole_one_behind_a_click(leveled: Path) -> None:
    markup = page(leveled, "model-b__3_softmax__0").read_text()
    dom = Dom(markup)
    assert [c[0]["text"] for c in dom.tables["traceback"]] == ["submission.py"]
    assert [c[0]["text"] for c in dom.tables["traceback-full"]] == ["worker.py", "submission.py"]
    assert re.search(r'<details class="trace"><summary>the whole traceback \(2 frames', markup)
    assert "the submission's frames: 1 of 2" in markup


def test_pages_without_an_error_have_no_error_section(leveled: Path) -> None:
    compile_error = page(leveled, "model-a__4_conv2d__0").read_text()
    assert 'id="error-h"' not in compile_error and "no error" not in compile_error
    assert compile_error.index('id="build-h"') < compile_error.index('id="code-h"')  # the failed build first
    assert "not reached: correctness, timing" in compile_error
    correct = page(leveled, "model-a__1_matmul__0").read_text()
    assert 'id="error-h"' not in correct and 'id="not-reached"' not in correct
    no_code = page(leveled, "model-a__2_relu__0").read_text()
    assert "not reached: build, correctness, timing (judging ended with no_code)" in no_code
    assert 'id="error-h"' in page(leveled, "model-b__2_relu__0").read_text()  # an interface error has one


# --- the filter, in the browser ------------------------------------------------------------------------

@needs_chromium
def test_the_hash_filters_the_submissions(leveled: Path, tmp_path: Path) -> None:
    dom = dump(leveled / "index.html", tmp_path, "#verdict=correct&q=model-b")
    shown = dom.shown("submissions")
    assert [(c[0]["text"], c[1]["text"]) for c in shown] == [("model-b", "1_matmul"), ("model-b", "3_softmax")]
    assert "2 of 18 shown" in dom.all_text
    by_level = dump(leveled / "index.html", tmp_path, "#level=2&sort=submissions.run:asc")
    assert [c[0]["text"] for c in by_level.shown("submissions")] == ["curated", "model-a", "model-b"]
    assert len(dump(leveled / "index.html", tmp_path).shown("submissions")) == 18
    shot = screenshot(leveled / "index.html", tmp_path, "report-index-filtered.png", "#verdict=correct",
                      size="1400,2600")
    assert shot.stat().st_size > 20_000


@needs_chromium
def test_typing_in_the_filter_box_filters_and_writes_the_hash(leveled: Path, tmp_path: Path) -> None:
    typing = ("<script>var box = document.querySelector('div.filters[data-table=submissions]');"
              "var q = box.querySelector('input[type=search]'); q.value = 'SOFTMAX  curated';"
              "q.dispatchEvent(new Event('input'));"
              "document.documentElement.setAttribute('data-hash', location.hash);</script>")
    dom = dump(with_script(leveled / "index.html", "index-typing-test.html", tail=typing), tmp_path)
    assert [(c[0]["text"], c[1]["text"]) for c in dom.shown("submissions")] == [("curated", "3_softmax")]
    assert "q=SOFTMAX%20%20curated" in dom.root_attrs.get("data-hash", "")


@needs_chromium
def test_detail_page_screenshots(leveled: Path, tmp_path: Path) -> None:
    for prefix in ("model-b__3_softmax__0", "model-a__4_conv2d__0"):
        assert screenshot(page(leveled, prefix), tmp_path, f"detail-{prefix}.png").stat().st_size > 20_000


# --- what a first look needs ----------------------------------------------------------------------------

def test_a_report_says_what_was_skipped_and_why(tmp_path: Path) -> None:
    rows = [r for r in fixture_rows() if r["verdict"] != "skipped"]
    plain = (write(tmp_path / "plain", rows).parent / "index.html").read_text()
    assert "skipped-note" not in plain
    for r in rows[:3]:
        r.update(verdict="skipped", reason="needs a CUDA GPU (__global__ kernel) but this run's device is cpu; rerun")
    html = (write(tmp_path / "r", rows).parent / "index.html").read_text()
    assert f"3 of {len(rows)} submission(s) skipped" in html and "needs a CUDA GPU (3)" in html


def test_a_report_without_curated_solutions_has_no_curated_column_nor_an_empty_overall(tmp_path: Path) -> None:
    rows = [{**r, "problem_level": LEVELS[r["problem"]]} for r in fixture_rows() if r["run"] != "curated"]
    dom = Dom((write(tmp_path / "r", rows).parent / "index.html").read_text())
    assert "curated" not in [h["key"] for h in dom.heads["problems"]]
    for table in ("fast-p", "at-k", "levels"):  # overall pools model-a and model-b here: it is shown
        assert "overall" in {row[0]["text"] for row in dom.tables[table]}, table
    only_curated = [{**r, "run": "curated"} for r in rows]
    html = (write(tmp_path / "c", only_curated).parent / "index.html").read_text()
    assert "<tfoot></tfoot>" in html, "no 'overall' line over zero pooled submissions"
    dom = Dom(html)
    for table in ("fast-p", "at-k", "levels"):  # overall pools nothing: it would read 0.0% everywhere
        assert {row[0]["text"] for row in dom.tables[table]} == {"curated"}, table
    text = format_leaderboard(json.loads((tmp_path / "c" / "summary.json").read_text()))
    assert "overall" not in text and "curated" in text


def test_a_speedup_below_the_timings_resolution_is_marked_wherever_it_is_shown(tmp_path: Path) -> None:
    rows = fixture_rows()
    fast = next(r for r in rows if (r["run"], r["problem"], r["sample"]) == ("model-b", "1_matmul", "0"))
    fast["timing"] = {**fast["timing"], "below_resolution": True}
    dom = Dom((write(tmp_path / "r", rows).parent / "index.html").read_text())
    column = [h["key"] for h in dom.heads["problems"]].index("run:model-b")
    [matmul] = [cells for cells in dom.tables["problems"] if cells[0]["text"] == "1_matmul"]
    assert "\u226550.00\u00d7 / \u226533.33\u00d7 below the timing's resolution" in matmul[column]["text"]
    other = matmul[[h["key"] for h in dom.heads["problems"]].index("run:model-a")]["text"]
    assert "1.50\u00d7 / 1.00\u00d7" in other and "\u2265" not in other and "resolution" not in other
    [row] = [cells for cells in dom.tables["submissions"] if (cells[0]["text"], cells[1]["text"]) == ("model-b", "1_matmul")]
    assert row[4]["text"] == "\u226550.00\u00d7 below the timing's resolution"
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert [e["runs"]["model-b"]["below_resolution"] for e in summary["per_problem"] if e["runs"]["model-b"]] == [
        True, False, False, False, False]
    markup = page(tmp_path / "r", "model-b__1_matmul__0").read_text()
    assert "<th>speedup vs eager</th><td>\u226550.00\u00d7 (below the timing&#x27;s resolution" in markup
    assert "<th>speedup vs eager</th><td>1.50\u00d7" in page(tmp_path / "r", "model-a__1_matmul__0").read_text()


def test_columns_with_nothing_in_them_are_hidden(tmp_path: Path, eager_only: Path) -> None:
    # Nothing correct, nothing timed (a CPU run of GPU answers, say): no column of blanks.
    rows = [{**r, "baselines": None} for r in fixture_rows() if r["verdict"] != "correct"]
    dom = Dom((write(tmp_path / "r", rows).parent / "index.html").read_text())
    assert not [h["key"] for h in dom.heads["problems"] if h["key"].endswith("_ms")]
    assert not [h["key"] for h in dom.heads["submissions"] if h["key"].startswith(("speedup", "median"))]
    assert {len(cells) for cells in dom.tables["submissions"]} == {len(dom.heads["submissions"])}
    # One baseline shown: its runs' headers and cells say nothing of the other.
    dom = Dom((eager_only / "index.html").read_text())
    runs = [h["text"] for h in dom.heads["problems"] if h["key"].startswith("run:") or h["key"] == "curated"]
    assert runs == ["model-a (vs eager)", "model-b (vs eager)", "curated (vs eager)"]
    column = [h["key"] for h in dom.heads["problems"]].index("run:model-a")
    [matmul] = [cells for cells in dom.tables["problems"] if cells[0]["text"] == "1_matmul"]
    assert matmul[column]["text"].endswith("correct 1.50\u00d7 2/3 correct"), matmul[column]["text"]


def test_an_answer_cut_off_inside_the_reasoning_never_reads_not_truncated(tmp_path: Path) -> None:
    text = "<think>\nLet me write a kernel.\n```python\nimport torch\n```\nNow the class ModelNew would"
    ext = extract(text).to_dict()
    legacy = {**ext, "truncated": False}  # as rows judged before the extraction set it for such answers
    rows = [{**no_code_row("nowhere", text, sample), "reason": ext["reason"], "extraction": e}
            for sample, e in (("now", ext), ("legacy", legacy))]
    write(tmp_path / "r", rows)
    for sample in ("now", "legacy"):
        markup = page(tmp_path / "r", f"model-a__2_relu__{sample}").read_text()
        assert "answer cut off inside the reasoning" in markup
        assert "<th>truncated</th><td>True</td>" in markup and "<th>truncated</th><td>False</td>" not in markup
        assert not re.search(r"not truncated|truncated: ?(False|no)\b", markup, re.I)

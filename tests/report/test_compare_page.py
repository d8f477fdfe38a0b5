"""``evalkit report --compare A B [C ...] [--out FILE.html] [--json]``: the text, the JSON and the HTML page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from click.testing import CliRunner
from html_dom import Dom, dump, needs_chromium, screenshot

from evalkit.cli.main import main
from evalkit.report.summary import write_reports
from evalkit.report_folder import ReportFolder
from evalkit.schedule.run_settings import OVERRIDES, record

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reports" / "results.jsonl"
XSS = "<img src=x onerror=alert(3)>"


def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def find(data: list[dict[str, Any]], run: str, problem: str, sample: str) -> dict[str, Any]:
    return next(r for r in data if (r["run"], r["problem"], r["sample"]) == (run, problem, sample))


def report(folder: Path, data: list[dict[str, Any]], asked: dict[str, Any] | None = None) -> Path:
    """A report folder of ``data``, with a ``run.json`` of ``asked`` (as ``evalkit score`` writes it) when given."""
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    if asked is not None:
        with ReportFolder.open(folder) as opened:
            record(opened, asked)
    write_reports(folder)
    return folder


def asked(**overrides: Any) -> dict[str, Any]:
    """``run.json``'s settings of a run that overrode ``overrides`` (every other problem setting left unset)."""
    settings: dict[str, Any] = {name: None for name in OVERRIDES}
    settings.update(baselines=["eager", "compile"], device="cuda", gpu="NVIDIA H200", evalkit_version="0.1.0", seed=7)
    return {**settings, **overrides}


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A, B (one verdict flipped, one speedup moved, one row gone, another seed) and C (asked for another atol, a
    new row)."""
    base = tmp_path_factory.mktemp("compare")
    a = report(base / "reports" / "a", rows(), asked())
    after = rows()
    find(after, "model-a", "1_matmul", "1").update(verdict="correct", speedup_vs_eager=1.1)
    find(after, "model-a", "1_matmul", "0")["speedup_vs_eager"] = 1.65
    b = report(base / "reports" / "b", [r for r in after if (r["run"], r["problem"]) != ("model-b", "5_layernorm")],
               asked(seed=8))  # another seed drawn: not a setting asked
    other = rows()
    for r in other:
        if r.get("correctness"):
            r["correctness"]["atol"] = 0.05
    other.append({**find(rows(), "model-a", "2_relu", "0"), "run": f"run{XSS}", "sample": "new"})
    c = report(base / "elsewhere" / "c", other, asked(atol=0.05))
    return a, b, c


def compare(*args: str) -> Any:
    return CliRunner().invoke(main, ["report", "--compare", *args])


def test_three_folders_as_text_json_and_a_page(three: tuple[Path, Path, Path], tmp_path: Path) -> None:
    a, b, c = three
    out = tmp_path / "pages" / "compare.html"
    result = compare(str(a), str(b), str(c), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout.count("comparing ") == 2
    assert f"comparing {a} -> {b}" in result.stdout and f"comparing {a} -> {c}" in result.stdout
    assert "verdict  model-a/1_matmul/1: incorrect -> correct" in result.stdout
    assert f"comparison: {out}" in result.stdout and out.is_file()
    as_json = compare(str(a), str(b), str(c), "--json")
    diffs = json.loads(as_json.stdout)
    assert [(d["before"], d["after"]) for d in diffs] == [(str(a), str(b)), (str(a), str(c))]
    assert len(diffs[0]["verdicts_flipped"]) == 1 and len(diffs[1]["only_after"]) == 1
    pair = json.loads(compare(str(a), str(b), "--json").stdout)
    assert pair["before"] == str(a) and pair["unchanged"] == 15  # two folders: one object, as before


def test_the_page_marks_changes_and_differing_settings(three: tuple[Path, Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "compare.html"
    assert compare(*map(str, three), "--out", str(out), "-q").stdout == ""
    markup = out.read_text()
    dom = Dom(markup)
    assert [c[0]["text"] for c in dom.tables["reports"]] == ["a", "b", "c"]
    atol = [h["text"] for h in dom.heads["reports"]].index("atol")
    assert [c[atol]["text"] for c in dom.tables["reports"]] == ["0.01", "0.01", "0.05"]  # what the rows record
    settings = {c[0]["text"]: [cell["text"] for cell in c[1:]] for c in dom.tables["settings"]}
    assert settings["atol"] == ["unset", "unset", "0.05"]  # what each run asked for
    assert settings["seed"] == ["7", "8", "7"] and settings["gpu"] == ["NVIDIA H200"] * 3
    assert "rtol" not in settings and re.search(r"Unset in every report.*?value\): [^<]*\brtol\b", markup)
    assert 'id="settings-differ"' in markup and "different settings (atol, marked)" in markup
    assert markup.count('class="warn" title="differs from a"') == 1  # c's atol; b's seed is shown, not warned of
    changes = {tuple(c[i]["text"] for i in range(3)): (c[-1]["text"], attrs["data-change"])
               for c, attrs in zip(dom.tables["changes"], dom.body_rows["changes"])}
    assert changes[("model-a", "1_matmul", "1")] == ("b: incorrect \u2192 correct", "verdict")
    assert changes[("model-a", "1_matmul", "0")] == ("b: vs eager 1.50\u00d7 \u2192 1.65\u00d7 (+10%)", "speedup")
    assert changes[("model-b", "5_layernorm", "0")] == ("not in b", "only")
    assert changes[("model-a", "2_relu", "0")] == ("unchanged", "same")
    assert changes[(f"run{XSS}", "2_relu", "new")][1] == "only"
    assert "<img" not in markup and markup.count("<script") == 1
    overall = [c for c in dom.tables["scores"] if c[1]["text"] == "b" and "pts" in c[-1]["text"]]
    assert overall  # fast_1 eager's change against a, in points
    problems, run = {}, ""
    for c in dom.tables["scores"]:
        run = run if c[0]["text"] == "\u2033" else c[0]["text"]
        problems[(run, c[1]["text"])] = c[3]["text"] if len(c) > 3 else None
    assert problems[("model-b", "a")] == "5 of 5" and problems[("model-b", "b")] == "4 of 5"  # b lost 5_layernorm
    assert problems[("overall", "b")] == "5 of 5"


@needs_chromium
def test_the_page_in_chromium_filters_by_change_and_links_resolve(three: tuple[Path, Path, Path],
                                                                   tmp_path: Path) -> None:
    out = tmp_path / "pages" / "compare.html"
    assert compare(*map(str, three), "--out", str(out)).exit_code == 0
    dom = dump(out, tmp_path, "#change=verdict")
    assert [tuple(c[i]["text"] for i in range(3)) for c in dom.shown("changes")] == [("model-a", "1_matmul", "1")]
    assert f"1 of {len(dom.tables['changes'])} shown" in dom.all_text
    local = [h for h in dom.links if not h.startswith("#")]
    assert any(h.endswith("/a/index.html") for h in local) and any("/submissions/" in h for h in local)
    for href in local:
        assert not urlsplit(href).scheme and (out.parent / unquote(href)).resolve().is_file(), href
    assert screenshot(out, tmp_path, "report-compare.png", size="1400,1600").stat().st_size > 20_000


def test_reports_of_curated_solutions_only_have_no_overall_to_compare(tmp_path: Path) -> None:
    curated = [{**r, "run": "curated"} for r in rows()]
    first, second = report(tmp_path / "a", curated), report(tmp_path / "b", curated[:-1])
    out = tmp_path / "compare.html"
    assert compare(str(first), str(second), "--out", str(out), "-q").exit_code == 0
    assert {c[0]["text"] for c in Dom(out.read_text()).tables["scores"]} == {"curated", "\u2033"}
    mixed = report(tmp_path / "c", rows())  # overall pools model-a and model-b here: compared against nothing
    assert compare(str(mixed), str(first), "--out", str(out), "-q").exit_code == 0
    scores = Dom(out.read_text()).tables["scores"]
    at = [c[0]["text"] for c in scores].index("overall")
    assert [[c["text"] for c in row[:3]] for row in scores[at:]] == [["overall", "c", "13"], ["\u2033", "a", "no rows"]]


def test_a_move_within_the_two_95_percent_intervals_is_no_change_on_the_page(tmp_path: Path) -> None:
    def timed(sample: str, speedup: float, ci: list[float]) -> dict[str, Any]:
        return {**find(rows(), "model-a", "1_matmul", "0"), "sample": sample, "speedup_vs_eager": speedup,
                "speedup_vs_eager_ci": ci, "speedup_vs_compile": None}

    a = report(tmp_path / "a", [timed("noisy", 1.0, [0.6, 1.9]), timed("apart", 1.0, [0.95, 1.05])])
    b = report(tmp_path / "b", [timed("noisy", 1.935, [1.5, 2.4]), timed("apart", 1.935, [1.85, 2.0])])
    out = tmp_path / "compare.html"
    assert compare(str(a), str(b), "--out", str(out), "-q").exit_code == 0
    dom = Dom(out.read_text())
    changes = {c[2]["text"]: (c[-1]["text"], attrs["data-change"])
               for c, attrs in zip(dom.tables["changes"], dom.body_rows["changes"])}
    assert changes["noisy"] == ("b: vs eager 1.00\u00d7 \u2192 1.94\u00d7 (+94%), within the 95% intervals", "same")
    assert changes["apart"] == ("b: vs eager 1.00\u00d7 \u2192 1.94\u00d7 (+94%)", "speedup")
    assert "1 speedup moved &gt; 5%, 95% intervals apart" in out.read_text()


def test_runs_that_asked_for_the_same_settings_are_not_warned_of_however_their_timing_went(tmp_path: Path) -> None:
    """Two runs with one run.json whose rows made different numbers of timed requests (repetitions adapt): what
    happened differs, the settings do not, and the page says so without a warning."""
    timed = rows()
    for r in timed:
        if r.get("timing"):
            r["timing"]["count"] = 23
    a, b = report(tmp_path / "a", rows(), asked()), report(tmp_path / "b", timed, asked())
    out = tmp_path / "compare.html"
    assert compare(str(a), str(b), "--out", str(out), "-q").exit_code == 0
    markup = out.read_text()
    dom = Dom(markup)
    requests = [h["text"] for h in dom.heads["reports"]].index("timing requests")
    assert [c[requests]["text"] for c in dom.tables["reports"]] == ["11", "23"]
    assert 'id="settings-differ"' not in markup and 'class="warn"' not in markup
    assert 'class="changed" title="unlike a"' in markup  # a fact, marked, not warned of
    unknown = tmp_path / "unknown"
    report(unknown, timed)  # no run.json: its settings are unknown, not different
    assert compare(str(a), str(unknown), "--out", str(out), "-q").exit_code == 0
    markup = out.read_text()
    assert 'id="settings-differ"' not in markup and 'id="settings-unknown"' in markup
    assert "No run.json in unknown" in markup

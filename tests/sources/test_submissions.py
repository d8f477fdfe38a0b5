"""Finding submissions: folders of runs, one run, one file, JSONL manifests, curated solutions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT
from evalkit.sources.problems import discover_problems
from evalkit.records import CURATED_RUN
from evalkit.sources.submissions import SubmissionError, discover

PROBLEMS = discover_problems(ROOT / "problems")
SEEDS = ROOT / "submissions" / "seeds"


def test_the_shipped_seeds_map_to_their_problems():
    found = discover(ROOT / "submissions", PROBLEMS)
    by_sample = {s.sample[:3]: (s.run, s.problem) for s in found.submissions}
    assert by_sample == {
        "000": ("seeds", "conv2d_gelu_globalavgpool"),
        "001": ("seeds", "conv2d_square_input_square_kernel"),
        "002": ("seeds", "convtranspose2d_gelu_groupnorm"),
        "003": ("seeds", "alexnet_conv1"),
        "004": ("seeds", "conv2d_asymmetric_input_asymmetric_kernel"),
    }


def test_a_run_folder_and_a_single_file_give_the_same_submission():
    whole = discover(SEEDS, PROBLEMS).submissions
    one_file = next((SEEDS / "alexnet_conv1").glob("*.txt"))
    single = discover(one_file, PROBLEMS).submissions
    assert len(whole) == 5 and len(single) == 1
    assert single[0].run == "seeds" and single[0].problem == "alexnet_conv1"
    assert single[0].key in {s.key for s in whole}


def test_a_jsonl_manifest_is_a_run(tmp_path: Path):
    manifest = tmp_path / "model-x.jsonl"
    rows = [{"problem": "alexnet_conv1", "sample": "a", "text": "no code here"},
            {"problem": "conv2d_gelu_globalavgpool", "text": "```python\nclass ModelNew: pass\n```"}]
    manifest.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    found = discover(manifest, PROBLEMS).submissions
    assert [(s.run, s.problem, s.sample) for s in found] == [
        ("model-x", "alexnet_conv1", "a"), ("model-x", "conv2d_gelu_globalavgpool", "2")]


def test_manifest_text_gets_the_same_newlines_as_a_file(tmp_path: Path):
    text = "one\r\ntwo\rthree\n"
    (tmp_path / "m.jsonl").write_text(json.dumps({"problem": "alexnet_conv1", "text": text}) + "\n")
    (tmp_path / "alexnet_conv1").mkdir()
    (tmp_path / "alexnet_conv1" / "a.txt").write_bytes(text.encode())
    [from_manifest] = discover(tmp_path / "m.jsonl", PROBLEMS).submissions
    [from_file] = discover(tmp_path / "alexnet_conv1" / "a.txt", PROBLEMS).submissions
    assert from_manifest.text == from_file.text == "one\ntwo\nthree\n"


def test_an_unknown_problem_names_the_known_ones(tmp_path: Path):
    (tmp_path / "run" / "alexnet_conv_1").mkdir(parents=True)
    (tmp_path / "run" / "alexnet_conv_1" / "a.txt").write_text("x")
    with pytest.raises(SubmissionError) as err:
        discover(tmp_path / "run" / "alexnet_conv_1" / "a.txt", PROBLEMS)
    assert "alexnet_conv1" in str(err.value) and "did you mean" in str(err.value)


def test_a_bad_manifest_line_names_the_file_and_line(tmp_path: Path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"problem": "alexnet_conv1", "text": "x"}\n{not json\n')
    with pytest.raises(SubmissionError, match=r"m\.jsonl:2: not valid JSON"):
        discover(manifest, PROBLEMS)
    manifest.write_text('{"problem": "alexnet_conv1"}\n')
    with pytest.raises(SubmissionError, match=r'm\.jsonl:1: each row needs "problem" and "text"'):
        discover(manifest, PROBLEMS)


def test_a_binary_file_is_reported_not_raised(tmp_path: Path):
    folder = tmp_path / "run" / "alexnet_conv1"
    folder.mkdir(parents=True)
    (folder / "blob.txt").write_bytes(b"\x00\x01\x02" * 100)
    found = discover(tmp_path / "run", PROBLEMS)
    assert found.submissions == []
    assert len(found.unreadable) == 1 and "binary" in found.unreadable[0][1]


def test_a_missing_path_is_a_clear_error(tmp_path: Path):
    with pytest.raises(SubmissionError, match="no such file or folder"):
        discover(tmp_path / "nope", PROBLEMS)


def test_the_problems_folder_yields_the_curated_solutions(tmp_path: Path):
    problem = tmp_path / "problems" / "tiny_relu"
    (problem / "solutions").mkdir(parents=True)
    (problem / "reference.py").write_text((FIXTURES / "problems" / "tiny_relu" / "reference.py").read_text())
    (problem / "solutions" / "fast.py").write_text("class ModelNew: pass\n")
    problems = discover_problems(tmp_path / "problems")
    found = discover(tmp_path / "problems", problems).submissions
    assert [(s.run, s.problem, s.sample) for s in found] == [(CURATED_RUN, "tiny_relu", "fast")]

"""Loading, settings (and where their defaults are shown), discovery and scaffolding (KernelBench import:
test_kernelbench_import.py)."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import pytest
import torch
from click.testing import CliRunner

from evalkit.cli.score import score_command
from evalkit.judge.problem_check import describe_problem
from evalkit.sources.problems import Problem, ProblemError, discover_problems, get_problem, load_problem
from evalkit.sources.scaffold import scaffold_problem, template_toml
from evalkit.sources.origin import ORIGIN_KEYS, KernelBenchOrigin, origin_toml
from evalkit.sources.settings import (SETTING_KEYS, SETTINGS, ProblemSettings, commented_toml, default_text,
                                      format_number, type_text)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "problems.md"
PROBLEMS = ROOT / "problems"
FIXTURES = ROOT / "tests" / "fixtures" / "problems"
BROKEN = ROOT / "tests" / "fixtures" / "broken_problems"

# id -> (KernelBench source, level, init inputs, input shape, output shape)
SHIPPED = {
    "conv2d_gelu_globalavgpool": ("level2/67_Conv2d_GELU_GlobalAvgPool", 2, [8, 64, 3],
                                  [128, 8, 256, 256], [128, 64]),
    "conv2d_square_input_square_kernel": ("level1/63_conv_standard_2D__square_input__square_kernel", 1,
                                          [16, 128, 3], [16, 16, 1024, 1024], [16, 128, 1022, 1022]),
    "convtranspose2d_gelu_groupnorm": ("level2/19_ConvTranspose2d_GELU_GroupNorm", 2, [64, 64, 3, 1, 8, 8],
                                       [128, 64, 256, 256], [128, 64, 258, 258]),
    "alexnet_conv1": ("level1/50_conv_standard_2D__square_input__square_kernel", 1, [1000],
                      [256, 3, 224, 224], [256, 96, 55, 55]),
    "conv2d_asymmetric_input_asymmetric_kernel": ("level1/56_conv_standard_2D__asymmetric_input__asymmetric_kernel",
                                                  1, [64, 128, (5, 7)], [8, 64, 512, 256], [8, 128, 508, 250]),
}


def _write(folder: Path, reference: str = "", toml: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference.py").write_text(reference or (FIXTURES / "tiny_relu" / "reference.py").read_text())
    if toml is not None:
        (folder / "problem.toml").write_text(toml)
    return folder


# ------------------------------------------------------------------------------------------- shipped


@pytest.fixture(scope="module")
def shipped() -> dict[str, Problem]:
    return discover_problems(PROBLEMS)


def test_the_five_problems_are_shipped(shipped: dict[str, Problem]) -> None:
    assert set(SHIPPED) <= set(shipped)
    assert list(shipped) == sorted(shipped)


@pytest.mark.parametrize("problem_id", sorted(SHIPPED))
def test_shipped_problem_metadata_and_init_args(shipped: dict[str, Problem], problem_id: str) -> None:
    source, level, init, _, _ = SHIPPED[problem_id]
    problem = shipped[problem_id]
    assert problem.source == f"KernelBench v0.1 {source}"
    assert problem.level == level
    assert problem.title and problem.tags
    assert problem.settings.tolerances() == (1e-2, 1e-2) and problem.settings.precision == "fp32"
    module = problem.load_module()
    assert module.get_init_inputs() == init
    assert issubclass(module.Model, torch.nn.Module)


@pytest.mark.parametrize("problem_id", sorted(SHIPPED))
def test_shipped_problem_shapes_on_meta_device(shipped: dict[str, Problem], problem_id: str) -> None:
    info = describe_problem(shipped[problem_id])
    assert info["error"] is None
    assert info["input_shapes"] == [SHIPPED[problem_id][3]]
    assert info["output_shape"] == SHIPPED[problem_id][4]


def _conv_lower_bounds(problem: Problem) -> tuple[float, float]:
    """A recount: 2 FLOP per multiply-add of the problem's one convolution; bytes of input + output."""
    module = problem.load_module()
    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs())
        [x] = module.get_inputs()
        out = model(x)
        conv = next(m for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.ConvTranspose2d)))
        conv_out = conv(x)
    macs_per_element = math.prod(conv.kernel_size) // conv.groups
    if isinstance(conv, torch.nn.ConvTranspose2d):  # each input element meets out_channels kernels
        flops = 2 * x.numel() * conv.out_channels * macs_per_element
    else:  # each output element sums in_channels kernels
        flops = 2 * conv_out.numel() * conv.in_channels * macs_per_element
    return flops, 4 * (x.numel() + out.numel())


@pytest.mark.parametrize("problem_id", sorted(SHIPPED))
def test_shipped_lower_bounds_match_a_recount(shipped: dict[str, Problem], problem_id: str) -> None:
    flops, min_bytes = _conv_lower_bounds(shipped[problem_id])
    settings = shipped[problem_id].settings
    assert settings.flops == pytest.approx(flops, rel=0.03)  # 19 adds GELU + GroupNorm (~1.5%)
    assert settings.min_bytes == pytest.approx(min_bytes, rel=0.02)


def test_judge_fixtures_load() -> None:
    found = discover_problems(ROOT / "tests" / "fixtures" / "judge_problems")
    assert {"linear_relu", "scale_rows"} <= set(found)
    assert found["linear_relu"].settings == ProblemSettings()


# ------------------------------------------------------------------------------------------ settings


def test_defaults_when_problem_toml_has_no_settings() -> None:
    problem = load_problem(FIXTURES / "tiny_relu")
    assert problem.settings == ProblemSettings()
    s = problem.settings
    assert (s.tolerances(), s.correctness_trials, s.timing_trials, s.warmup_trials) == ((1e-2, 1e-2), 5, 100, 5)
    assert (s.min_timing_trials, s.timing_precision, s.timing_budget_s) == (10, 1e-2, 10.0)
    assert (s.build_timeout_s, s.run_timeout_s, s.flops, s.min_bytes) == (900.0, None, None, None)
    assert (problem.title, problem.level, problem.tags) == ("Tiny ReLU", 1, ("fixture", "elementwise"))


def test_no_problem_toml_means_defaults(tmp_path: Path) -> None:
    problem = load_problem(_write(tmp_path / "bare"))
    assert (problem.id, problem.title, problem.source, problem.level, problem.tags) == ("bare", "bare", "", None, ())
    assert problem.settings == ProblemSettings()


def test_settings_overrides() -> None:
    s = load_problem(FIXTURES / "tiny_conv").settings
    assert s == ProblemSettings(atol=1e-3, rtol=2e-3, correctness_trials=3, timing_trials=10, warmup_trials=2,
                                build_timeout_s=120.0, run_timeout_s=60.0, flops=15552.0, min_bytes=2688.0)
    assert isinstance(s.build_timeout_s, float) and isinstance(s.timing_trials, int)


def test_unknown_setting_suggests_the_right_key() -> None:
    with pytest.raises(ProblemError, match=r"unknown key 'atoll' \(did you mean 'atol'\?\)") as err:
        load_problem(BROKEN / "unknown_key")
    assert "unknown_key/problem.toml" in str(err.value)


def test_unknown_metadata_key_suggests(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match=r"unknown key 'titel' \(did you mean 'title'\?\)"):
        load_problem(_write(tmp_path / "p", toml='titel = "x"\n'))


def test_settings_table_says_to_write_keys_at_top_level(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match=r"unexpected table \[settings\].*write its keys \(rtol\) at the top level"):
        load_problem(_write(tmp_path / "p", toml="[settings]\nrtol = 0.1\n"))


@pytest.mark.parametrize("toml, message", [
    ("atol = -1.0\n", "'atol' must be a finite number >= 0"),
    ('atol = "tight"\n', "'atol' must be a number"),
    ("rtol = true\n", "'rtol' must be a number"),
    ("timing_trials = 2.5\n", "'timing_trials' must be an integer"),
    ("correctness_trials = 0\n", "'correctness_trials' must be a finite number >= 1"),
    ("run_timeout_s = 0\n", "'run_timeout_s' must be a finite number > 0"),
    ("flops = nan\n", "'flops' must be a finite number > 0"),
    ("min_timing_trials = 0\n", "'min_timing_trials' must be a finite number >= 1"),
    ("min_timing_trials = 2.5\n", "'min_timing_trials' must be an integer"),
    ("timing_checks = 2\n", "'timing_checks' must be a finite number >= 3"),
    ("timing_precision = 0\n", "'timing_precision' must be a finite number > 0"),
    ('timing_precision = "1%"\n', "'timing_precision' must be a number"),
    ("timing_budget_s = -1\n", "'timing_budget_s' must be a finite number > 0"),
    ("timing_budget_s = inf\n", "'timing_budget_s' must be a finite number > 0"),
    ("level = 0\n", "'level' must be a positive integer"),
    ('tags = "conv"\n', "'tags' must be a list of strings"),
    ("title = 3\n", "'title' must be a string"),
    ("title = \n", "not valid TOML"),
])
def test_invalid_values_name_file_and_key(tmp_path: Path, toml: str, message: str) -> None:
    with pytest.raises(ProblemError) as err:
        load_problem(_write(tmp_path / "p", toml=toml))
    assert message in str(err.value)
    assert str(tmp_path / "p" / "problem.toml") in str(err.value)


def test_integers_are_accepted_for_float_settings(tmp_path: Path) -> None:
    problem = load_problem(_write(tmp_path / "p", toml="atol = 0\nflops = 1000\n"))
    assert problem.settings.atol == 0.0 and problem.settings.flops == 1000.0


def test_errors_show_a_valid_line(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match=r"'timing_trials' must be an integer, got 2\.5 "
                                           r"\(e\.g\. `timing_trials = 100`; see docs/problems\.md\)"):
        load_problem(_write(tmp_path / "p", toml="timing_trials = 2.5\n"))


# ---------------------------------------------------------------- one declaration, shown everywhere


def _docs_settings_table() -> dict[str, tuple[str, str]]:
    """docs/problems.md's settings table: key -> (type cell, default cell without backticks)."""
    text = DOCS.read_text()
    header = "| setting | type | default | meaning |\n| --- | --- | --- | --- |\n"
    assert header in text, f"{DOCS}: no settings table (its header is {header!r})"
    table = text.split(header, 1)[1].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()]
    return {key.strip("`"): (kind, default.strip("`")) for key, kind, default, _ in rows}


def test_docs_list_every_setting_with_its_declared_default_and_type() -> None:
    table = _docs_settings_table()
    assert list(table) == list(SETTING_KEYS)
    for key, (kind, default) in table.items():
        assert default == default_text(key), f"docs/problems.md: {key} default {default} != {default_text(key)}"
        assert kind == type_text(key), f"docs/problems.md: {key} type {kind!r} != {type_text(key)!r}"


def test_default_text_reads_back_as_the_default() -> None:
    for key, setting in SETTINGS.items():
        if setting.default is None:
            assert default_text(key) == "none"
        else:
            assert tomllib.loads(f"value = {default_text(key)}")["value"] == setting.default


@pytest.mark.parametrize("value, text", [(1e-2, "1e-2"), (900.0, "900"), (5, "5"), (0.5, "0.5"), (1e9, "1e9"),
                                         (0.27e9, "2.7e8"), (2.5e-3, "2.5e-3"), (None, "none")])
def test_format_number(value: float | None, text: str) -> None:
    assert format_number(value) == text


def _uncommented(toml: str, keys: tuple[str, ...]) -> str:
    return re.sub(rf"^# ({'|'.join(keys)}) = ", r"\1 = ", toml, flags=re.M)


def test_template_settings_parse_back_to_the_defaults(tmp_path: Path) -> None:
    toml = template_toml("op")
    assert all(f"# {key} = " in toml for key in SETTING_KEYS)
    folder = _write(tmp_path / "op")
    with_default = tuple(key for key, setting in SETTINGS.items() if setting.default is not None)
    (folder / "problem.toml").write_text(_uncommented(toml, with_default))
    assert set(with_default) <= set(tomllib.loads((folder / "problem.toml").read_text()))
    assert load_problem(folder).settings == ProblemSettings()
    (folder / "problem.toml").write_text(_uncommented(toml, SETTING_KEYS))
    settings = load_problem(folder).settings
    assert (settings.flops, settings.min_bytes) == (SETTINGS["flops"].example, SETTINGS["min_bytes"].example)


def test_commented_toml_of_some_keys() -> None:
    lines = commented_toml(("flops",))
    assert len(lines) == 2 and lines[1].startswith("# flops = 1e9  # ") and "[FLOP]" in lines[1]


def test_score_help_shows_the_declared_defaults() -> None:
    text = " ".join(CliRunner().invoke(score_command, ["--help"], terminal_width=400).output.split())
    for option, key in (("--correctness-trials, --trials", "correctness_trials"), ("--timing-trials", "timing_trials"),
                        ("--warmup-trials, --warmup", "warmup_trials"),
                        ("--build-timeout", "build_timeout_s"), ("--timing-budget", "timing_budget_s")):
        default = re.escape(default_text(key))
        assert re.search(rf"{option} \S+ RANGE [^[]*\[(s; )?problem\.toml, {default}\]", text), option
    for option in ("--atol", "--rtol"):
        assert re.search(rf"{option} \S+ RANGE [^[]*unset: by precision[^[]*\[problem\.toml\]", text), option
    assert re.search(r"--precision \[fp32\|fp16\|bf16\] [^[]*\[problem\.toml, \"fp32\"\]", text)
    assert re.search(r"--run-timeout, --timeout \S+ RANGE [^[]*unset: derived from the reference's own time[^[]*"
                     r"\[s; problem\.toml\]", text)


# ------------------------------------------------------------------------------- hashing, modules, dict


def test_sha256_covers_reference_and_toml(tmp_path: Path) -> None:
    folder = _write(tmp_path / "p")
    problem = load_problem(folder)
    before = problem.sha256
    assert len(before) == 64 and problem.sha256 == before
    (folder / "problem.toml").write_text('title = "x"\n')
    with_toml = problem.sha256
    assert with_toml != before
    (folder / "reference.py").write_text((folder / "reference.py").read_text() + "\n# edited\n")
    assert problem.sha256 not in (before, with_toml)


def test_load_module_reloads_under_unique_names(tmp_path: Path) -> None:
    folder = _write(tmp_path / "p", reference="VALUE = 1\n")
    problem = load_problem(folder)
    first = problem.load_module()
    (folder / "reference.py").write_text("VALUE = 2\n")
    second = problem.load_module()
    assert (first.VALUE, second.VALUE) == (1, 2)
    assert first.__name__ != second.__name__
    assert second.__file__ == str(folder / "reference.py")


def test_load_module_syntax_error_names_file_and_line() -> None:
    problem = load_problem(BROKEN / "syntax_error")
    with pytest.raises(ProblemError, match=r"syntax_error/reference\.py:9: syntax error"):
        problem.load_module()


def test_load_module_import_error_is_clear() -> None:
    with pytest.raises(ProblemError, match=r"importing it raised ModuleNotFoundError: .*evalkit_no_such_module"
                                           r".*\(line 3 of reference\.py\)"):
        load_problem(BROKEN / "import_error").load_module()
    assert not any("import_error" in name for name in sys.modules if name.startswith("evalkit_problem_"))


def test_init_inputs_or_none() -> None:
    before = {name for name in sys.modules if name.startswith("evalkit_problem_")}
    for _ in range(3):  # asked once per answer built: no module kept per call
        assert load_problem(FIXTURES / "tiny_conv").init_inputs_or_none() == [3, 4, 3]
    assert {name for name in sys.modules if name.startswith("evalkit_problem_")} == before
    for broken in ("import_error", "syntax_error"):
        assert load_problem(BROKEN / broken).init_inputs_or_none() is None


def test_to_dict_is_json_safe() -> None:
    data = json.loads(json.dumps(load_problem(FIXTURES / "tiny_conv").to_dict()))
    assert data["id"] == "tiny_conv" and data["tags"] == ["fixture", "conv2d"]
    assert data["settings"]["atol"] == 1e-3 and data["path"].endswith("tiny_conv")


# ----------------------------------------------------------------------------------------- discovery


def test_discover_ignores_hidden_and_pycache_and_sorts(tmp_path: Path) -> None:
    for name in ("b_op", "a_op"):
        _write(tmp_path / name)
    (tmp_path / ".git").mkdir()
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "README.md").write_text("not a problem")
    assert list(discover_problems(tmp_path)) == ["a_op", "b_op"]


def test_discover_lists_folders_without_reference(tmp_path: Path) -> None:
    _write(tmp_path / "good")
    (tmp_path / "empty_one").mkdir()
    (tmp_path / "empty_two").mkdir()
    with pytest.raises(ProblemError, match=r"folder\(s\) without reference\.py: empty_one, empty_two"):
        discover_problems(tmp_path)


def test_discover_missing_root_is_clear(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="does not exist"):
        discover_problems(tmp_path / "nowhere")


def test_get_problem_suggests_close_id(shipped: dict[str, Problem]) -> None:
    assert get_problem(shipped, "alexnet_conv1").id == "alexnet_conv1"
    with pytest.raises(ProblemError) as err:
        get_problem(shipped, "alexnet_conv")
    assert "unknown problem 'alexnet_conv' (did you mean 'alexnet_conv1'?); known: alexnet_conv1, " in str(err.value)
    with pytest.raises(ProblemError, match=r"unknown problem 'zzz'; known: "):
        get_problem(shipped, "zzz")
    with pytest.raises(ProblemError, match="no problems are loaded"):
        get_problem({}, "x")


# ---------------------------------------------------------------------------------------- scaffolding


def test_scaffold_writes_a_loadable_problem(tmp_path: Path) -> None:
    folder = scaffold_problem(tmp_path / "problems", "my_op2")
    assert folder == tmp_path / "problems" / "my_op2"
    problem = load_problem(folder)
    assert problem.title == "my_op2" and problem.settings == ProblemSettings()
    assert "# atol = 1e-2" in (folder / "problem.toml").read_text()
    module = problem.load_module()
    assert module.Model(*module.get_init_inputs())(*module.get_inputs()).shape == (16, 64)


def test_scaffold_refuses_to_overwrite(tmp_path: Path) -> None:
    folder = scaffold_problem(tmp_path, "op")
    (folder / "reference.py").write_text("# mine\n")
    with pytest.raises(ProblemError, match="refusing to overwrite"):
        scaffold_problem(tmp_path, "op")
    assert (folder / "reference.py").read_text() == "# mine\n"


@pytest.mark.parametrize("bad", ["MyOp", "my-op", "", "_op", "op/x", "../op", "op name"])
def test_scaffold_validates_id(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ProblemError, match="invalid problem id"):
        scaffold_problem(tmp_path, bad)
    assert not any(tmp_path.iterdir())


# ------------------------------------------------------------------------------- KernelBench origin


_ORIGIN = ('kernelbench_level = 1\nkernelbench_number = 50\nkernelbench_file = "level1/50_x.py"\n'
           f'kernelbench_sha256 = "{"ab" * 32}"\nkernelbench_version = "v0.1"\n')


def test_the_kernelbench_origin_is_loaded(tmp_path: Path) -> None:
    problem = load_problem(_write(tmp_path / "p", toml=_ORIGIN))
    assert problem.kernelbench == KernelBenchOrigin(1, 50, "level1/50_x.py", "ab" * 32, "v0.1")
    assert (problem.kernelbench_level, problem.kernelbench_number, problem.level) == (1, 50, 1)
    assert problem.to_dict()["kernelbench"]["number"] == 50
    assert load_problem(FIXTURES / "tiny_relu").kernelbench is None
    assert load_problem(_write(tmp_path / "q", toml="level = 3\n" + _ORIGIN)).level == 3


def test_origin_toml_reads_back(tmp_path: Path) -> None:
    origin = KernelBenchOrigin(2, 19, 'level2/19_"odd"\\name.py', "0" * 64, "")
    problem = load_problem(_write(tmp_path / "p", toml="\n".join(origin_toml(origin)) + "\n"))
    assert problem.kernelbench == origin


@pytest.mark.parametrize("toml, message", [
    ("kernelbench_level = 1\n", "without kernelbench_number"),
    ('kernelbench_file = "x.py"\n', "without kernelbench_level and kernelbench_number"),
    ("kernelbench_level = 0\nkernelbench_number = 1\n", "'kernelbench_level' must be a positive integer"),
    ("kernelbench_level = 1\nkernelbench_number = true\n", "'kernelbench_number' must be a positive integer"),
    ('kernelbench_level = 1\nkernelbench_number = 2\nkernelbench_sha256 = "xyz"\n', "64 lowercase hex digits"),
    ("kernelbench_level = 1\nkernelbench_number = 2\nkernelbench_version = 1\n", "must be a string"),
    ("kernelbench_numbr = 2\n", "did you mean 'kernelbench_number'"),
])
def test_a_bad_origin_names_the_file_and_key(tmp_path: Path, toml: str, message: str) -> None:
    folder = _write(tmp_path / "p", toml=toml)
    with pytest.raises(ProblemError, match=re.escape(message)) as err:
        load_problem(folder)
    assert str(folder / "problem.toml") in str(err.value)


def test_docs_list_every_origin_key() -> None:
    header = "| key | type | meaning |\n| --- | --- | --- |\n"
    text = DOCS.read_text()
    assert header in text, f"{DOCS}: no table of the kernelbench_ keys"
    table = text.split(header, 1)[1].split("\n\n", 1)[0]
    assert [line.split("|")[1].strip().strip("`") for line in table.splitlines()] == list(ORIGIN_KEYS)

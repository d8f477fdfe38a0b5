"""``evalkit problems import``: KernelBench files -> problem folders with their origin recorded, the shipped
problems recognised by their code whatever its formatting, ids that do not depend on import order."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import pytest

from conftest import FIXTURES, ROOT
from evalkit.judge.problem_check import describe_problem
from evalkit.sources.kernelbench import import_kernelbench
from evalkit.sources.kernelbench_layout import (kernel_file, kernelbench_id, kernelbench_numbers, normal_form,
                                                problem_file_parts, stable_id)
from evalkit.sources.problems import ProblemError, discover_problems, load_problem
from evalkit.sources.settings import commented_toml

KB = FIXTURES / "kernelbench_layout" / "KernelBench"
PROBLEMS = ROOT / "problems"
# The shipped problems and the KernelBench files (reformatted in the fixture) they are.
SHIPPED = {"alexnet_conv1": (1, 50), "conv2d_asymmetric_input_asymmetric_kernel": (1, 56),
           "conv2d_square_input_square_kernel": (1, 63), "convtranspose2d_gelu_groupnorm": (2, 19),
           "conv2d_gelu_globalavgpool": (2, 67)}
NEW = {"l1_1_square_matrix_multiplication": (1, 1), "l1_19_relu": (1, 19), "l2_2_matmul_scale_tiny": (2, 2)}
ALL_NEW = {**NEW, "l1_50_conv_standard_2d_square_input_square_kernel": (1, 50),
           "l1_56_conv_standard_2d_asymmetric_input_asymmetric_kernel": (1, 56),
           "l1_63_conv_standard_2d_square_input_square_kernel": (1, 63),
           "l2_19_convtranspose2d_gelu_groupnorm": (2, 19), "l2_67_conv2d_gelu_globalavgpool": (2, 67)}


def _origins(root: Path) -> dict[str, tuple[int, int] | None]:
    return {pid: (p.kernelbench_level, p.kernelbench_number) if p.kernelbench else None
            for pid, p in discover_problems(root).items()}


def _shipped_copy(tmp_path: Path, name: str = "problems") -> Path:
    root = tmp_path / name
    shutil.copytree(PROBLEMS, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and "__pycache__" not in p.parts}


# ------------------------------------------------------------------------------------------- names


def test_names_and_ids() -> None:
    assert kernelbench_id("ConvTranspose2d_GELU_GroupNorm") == "convtranspose2d_gelu_groupnorm"
    assert kernelbench_id("conv_standard_2D__square_input__square_kernel") == "conv_standard_2d_square_input_square_kernel"
    assert stable_id(1, 50, "conv_standard_2D__square_input__square_kernel") == \
        "l1_50_conv_standard_2d_square_input_square_kernel"
    assert problem_file_parts(Path("1_EleutherAI-gpt-neo-2p7B_bs32_seq256.py")) == (1, "EleutherAI-gpt-neo-2p7B_bs32_seq256")
    assert stable_id(4, 1, "EleutherAI-gpt-neo-2p7B_bs32_seq256") == "l4_1_eleutherai_gpt_neo_2p7b_bs32_seq256"
    assert problem_file_parts(Path("helpers.py")) is None and problem_file_parts(Path("3_.py")) is None
    kernel = kernel_file(Path("runs/x/level_2_problem_19_sample_3_kernel.py"))
    assert kernel is not None and (kernel.level, kernel.number, kernel.sample) == (2, 19, 3)
    assert kernel_file(Path("level_2_problem_19_sample_3_prompt.txt")) is None


def test_normal_form_ignores_formatting_comments_and_docstrings_only() -> None:
    base = "import torch\n\nclass Model:\n    def f(self, x):\n        return x + 1\n\nN = 4\n"
    same = ('"""doc."""\nimport torch\nclass Model:\n    """Model."""\n    def f(self,x):  # add\n'
            "        '''f.'''\n        return (x+1)\n# end\nN = 4\n")
    assert normal_form(base) == normal_form(same) == normal_form(same.encode())
    assert normal_form(base) != normal_form(base.replace("N = 4", "N = 5"))
    assert normal_form(base) != normal_form(base.replace("x + 1", "1 + x"))
    assert normal_form("def broken(:\n") == "def broken(:\n"


@pytest.mark.parametrize("problem_id", sorted(SHIPPED))
def test_the_fixture_holds_the_shipped_code_reformatted(problem_id: str) -> None:
    level, number = SHIPPED[problem_id]
    [file] = (KB / f"level{level}").glob(f"{number}_*.py")
    reference = (PROBLEMS / problem_id / "reference.py").read_bytes()
    assert file.read_bytes() != reference and normal_form(file.read_bytes()) == normal_form(reference)


# ------------------------------------------------------------------------------------------ import


def test_import_into_an_empty_folder(tmp_path: Path) -> None:
    lines: list[str] = []
    outcome = import_kernelbench(KB, tmp_path / "problems", report=lines.append, version="v0.1")
    assert sorted(p.name for p in outcome.created) == sorted(ALL_NEW)
    assert _origins(tmp_path / "problems") == ALL_NEW
    folder = tmp_path / "problems" / "l2_19_convtranspose2d_gelu_groupnorm"
    file = KB / "level2" / "19_ConvTranspose2d_GELU_GroupNorm.py"
    assert (folder / "reference.py").read_bytes() == file.read_bytes()
    toml = (folder / "problem.toml").read_text()
    meta = tomllib.loads(toml)
    assert meta["source"] == "KernelBench v0.1 level2/19_ConvTranspose2d_GELU_GroupNorm"
    assert (meta["kernelbench_level"], meta["kernelbench_number"], meta["kernelbench_version"]) == (2, 19, "v0.1")
    assert meta["kernelbench_file"] == "level2/19_ConvTranspose2d_GELU_GroupNorm.py"
    assert meta["kernelbench_sha256"] == hashlib.sha256(file.read_bytes()).hexdigest()
    assert "\n".join(commented_toml(("flops", "min_bytes"))) in toml
    problem = load_problem(tmp_path / "problems" / "l1_19_relu")
    assert (problem.level, problem.title, problem.tags) == (1, "ReLU", ("kernelbench",))
    assert describe_problem(problem)["output_shape"] == [4, 32]
    assert lines[-1] == f"imported 8, linked 0, already present 0, skipped 0 of 8 file(s) into {tmp_path / 'problems'}"


def test_import_links_the_shipped_problems_instead_of_duplicating_them(tmp_path: Path) -> None:
    root = _shipped_copy(tmp_path)
    before = _snapshot(root)
    lines: list[str] = []
    outcome = import_kernelbench(KB, root, report=lines.append, version="v0.1")
    assert sorted(p.name for p in outcome.linked) == sorted(SHIPPED)
    assert sorted(p.name for p in outcome.created) == sorted(NEW)
    assert _origins(root) == {**SHIPPED, **NEW}
    after = _snapshot(root)
    for name, data in before.items():  # nothing changed but problem.toml files growing their origin
        assert after[name] == data if not name.endswith("problem.toml") else after[name].startswith(data)
    alexnet = load_problem(root / "alexnet_conv1")
    assert alexnet.kernelbench.file == "level1/50_conv_standard_2D__square_input__square_kernel.py"
    assert alexnet.kernelbench.version == "v0.1" and alexnet.title == "AlexNet conv1 (Conv2d 11x11, stride 4)"
    assert any(line.startswith("linked ") and line.endswith("records KernelBench level 1 problem 50)") for line in lines)
    again: list[str] = []
    assert import_kernelbench(KB, root, report=again.append).present and _snapshot(root) == after
    assert again[-1].startswith("imported 0, linked 0, already present 8, skipped 0 of 8")


def test_ids_do_not_depend_on_import_order(tmp_path: Path) -> None:
    orders = {"whole": [KB], "level2_first": [KB / "level2", KB / "level1"],
              "file_by_file_reversed": sorted(KB.rglob("*.py"), reverse=True)}
    for start in ("empty", "shipped"):
        results = {}
        for name, sources in orders.items():
            root = _shipped_copy(tmp_path / start, name) if start == "shipped" else tmp_path / start / name
            for source in sources:
                import_kernelbench(source, root, report=lambda line: None, version="v0.1")
            results[name] = (_origins(root), {k: v for k, v in _snapshot(root).items()})
        first = results["whole"]
        assert all(result == first for result in results.values()), start


def test_a_problem_edited_after_import_is_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "problems"
    import_kernelbench(KB / "level1", root)
    reference = root / "l1_19_relu" / "reference.py"
    reference.write_text(reference.read_text().replace("dim = 32", "dim = 64"))
    lines: list[str] = []
    outcome = import_kernelbench(KB / "level1", root, report=lines.append)
    assert [p.name for p in outcome.skipped] == ["19_ReLU.py"] and "dim = 64" in reference.read_text()
    assert any("l1_19_relu is already KernelBench level 1 problem 19, but its code differs" in line for line in lines)


def test_a_folder_in_the_way_is_never_overwritten(tmp_path: Path) -> None:
    root = tmp_path / "problems"
    (root / "l1_19_relu").mkdir(parents=True)
    (root / "l1_19_relu" / "reference.py").write_text("# something else\n")
    lines: list[str] = []
    outcome = import_kernelbench(KB / "level1" / "19_ReLU.py", root, report=lines.append)
    assert outcome.skipped == [KB / "level1" / "19_ReLU.py"]
    assert (root / "l1_19_relu" / "reference.py").read_text() == "# something else\n"
    assert "add kernelbench_level = 1 and kernelbench_number = 19 to its problem.toml" in lines[0]


def test_the_same_code_at_another_place_gets_a_folder_of_its_own(tmp_path: Path) -> None:
    root = tmp_path / "problems"
    import_kernelbench(KB / "level1" / "19_ReLU.py", root)
    copy = tmp_path / "kb" / "level3" / "7_Another_ReLU.py"
    copy.parent.mkdir(parents=True)
    shutil.copy(KB / "level1" / "19_ReLU.py", copy)
    outcome = import_kernelbench(copy, root)
    assert [p.name for p in outcome.created] == ["l3_7_another_relu"]
    assert _origins(root) == {"l1_19_relu": (1, 19), "l3_7_another_relu": (3, 7)}


def test_a_broken_problem_is_not_linked_and_said_so(tmp_path: Path) -> None:
    root = tmp_path / "problems"
    (root / "relu").mkdir(parents=True)
    shutil.copy(KB / "level1" / "19_ReLU.py", root / "relu" / "reference.py")
    (root / "relu" / "problem.toml").write_text("atol = -1\n")
    lines: list[str] = []
    outcome = import_kernelbench(KB / "level1" / "19_ReLU.py", root, report=lines.append)
    assert [p.name for p in outcome.created] == ["l1_19_relu"]
    assert lines[0].startswith(f"note: {root / 'relu'} is not considered for linking: ") and "'atol'" in lines[0]
    assert (root / "relu" / "problem.toml").read_text() == "atol = -1\n"


def test_a_file_outside_a_level_folder_needs_a_level(tmp_path: Path) -> None:
    source = tmp_path / "3_Batched_matrix_multiplication.py"
    shutil.copy(KB / "level1" / "1_Square_matrix_multiplication_.py", source)
    lines: list[str] = []
    outcome = import_kernelbench(source, tmp_path / "out", report=lines.append)
    assert outcome.skipped == [source] and "pass --level L" in lines[0]
    [folder] = import_kernelbench(source, tmp_path / "out", level=3).created
    assert folder.name == "l3_3_batched_matrix_multiplication"
    assert load_problem(folder).kernelbench.file == "level3/3_Batched_matrix_multiplication.py"


def test_files_that_are_not_problems_are_skipped_and_said_so(tmp_path: Path) -> None:
    (tmp_path / "kb" / "level1").mkdir(parents=True)
    (tmp_path / "kb" / "level1" / "helpers.py").write_text("# not a problem\n")
    (tmp_path / "kb" / "level1" / "notes.txt").write_text("ignored\n")
    lines: list[str] = []
    outcome = import_kernelbench(tmp_path / "kb", tmp_path / "problems", report=lines.append)
    assert len(outcome.skipped) == 1 and "helpers.py: not a KernelBench problem file" in lines[0]
    assert not any("notes.txt" in line for line in lines)


def test_import_missing_source(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="no such file or folder"):
        import_kernelbench(tmp_path / "missing", tmp_path / "problems")


def test_kernelbench_numbers_for_the_report(tmp_path: Path) -> None:
    root = _shipped_copy(tmp_path)
    import_kernelbench(KB / "level2", root, report=lambda line: None)
    numbers = kernelbench_numbers(discover_problems(root))
    assert numbers == {"convtranspose2d_gelu_groupnorm": (2, 19), "conv2d_gelu_globalavgpool": (2, 67),
                       "l2_2_matmul_scale_tiny": (2, 2)}


def test_two_folders_recording_one_kernelbench_problem_are_warned_about(tmp_path: Path) -> None:
    root = tmp_path / "problems"
    import_kernelbench(KB / "level1" / "19_ReLU.py", root)
    shutil.copytree(root / "l1_19_relu", root / "a_relu")
    lines: list[str] = []
    outcome = import_kernelbench(KB / "level1" / "19_ReLU.py", root, report=lines.append)
    assert [p.name for p in outcome.present] == ["a_relu"]  # the first by id stands for the pair, as before
    assert lines[0] == (f"warning: {root / 'a_relu' / 'problem.toml'} and {root / 'l1_19_relu' / 'problem.toml'} "
                        f"both record KernelBench level 1 problem 19 (kernelbench_level = 1, kernelbench_number = 19), "
                        f"so a KernelBench run's level_1_problem_19_sample_<S>_kernel.py could answer either of them; "
                        f"remove the folder that duplicates another, or fix the kernelbench_number of the one that is "
                        f"another KernelBench problem (`evalkit problems check` fails them; importing compares the "
                        f"file with {root / 'a_relu'} only)")


# --------------------------------------------------------------------------------------- precision


def test_a_requested_precision_goes_into_problem_toml_and_the_reference_stays_kernelbenchs(tmp_path: Path) -> None:
    outcome = import_kernelbench(KB, tmp_path / "bf16", report=lambda line: None, precision="bf16")
    assert sorted(p.name for p in outcome.created) == sorted(ALL_NEW) and outcome.kept_precision == []
    for folder in outcome.created:
        problem = load_problem(folder)
        assert problem.settings.precision == "bf16", folder
        assert tomllib.loads((folder / "problem.toml").read_text())["precision"] == "bf16"
        assert (folder / "reference.py").read_bytes() == (KB / problem.kernelbench.file).read_bytes()
    [plain] = import_kernelbench(KB / "level1" / "19_ReLU.py", tmp_path / "plain", report=lambda line: None).created
    assert "precision" not in tomllib.loads((plain / "problem.toml").read_text())  # not asked for: left at its default
    assert load_problem(plain).settings.precision == "fp32"


def test_a_folder_already_there_keeps_its_precision_and_the_import_says_so(tmp_path: Path) -> None:
    root = tmp_path / "problems"
    [folder] = import_kernelbench(KB / "level1" / "19_ReLU.py", root, precision="bf16").created
    before = _snapshot(root)
    lines: list[str] = []
    outcome = import_kernelbench(KB / "level1" / "19_ReLU.py", root, report=lines.append, precision="fp16")
    assert outcome.present == [folder] and outcome.kept_precision == [folder] and _snapshot(root) == before
    assert lines[1] == (f"warning: {folder} keeps its precision bf16 (`precision` in its problem.toml; fp32 when "
                        f"unset), not the fp16 asked for: an import never changes the settings of a folder that was "
                        f"already there. To judge it in fp16, set `precision = \"fp16\"` in {folder / 'problem.toml'}, "
                        f"or pass `--precision fp16` to `evalkit score` for one run")
    for same in ("bf16", None):  # the precision it has, or none asked for: nothing to say
        quiet: list[str] = []
        assert import_kernelbench(KB / "level1" / "19_ReLU.py", root, report=quiet.append,
                                  precision=same).kept_precision == []
        assert not any("precision" in line for line in quiet)


def test_a_linked_problem_keeps_its_precision_and_the_import_says_so(tmp_path: Path) -> None:
    root = _shipped_copy(tmp_path)
    lines: list[str] = []
    outcome = import_kernelbench(KB / "level2", root, report=lines.append, precision="bf16")
    linked = sorted(p.name for p in outcome.linked)
    assert linked == ["conv2d_gelu_globalavgpool", "convtranspose2d_gelu_groupnorm"]
    assert sorted(p.name for p in outcome.kept_precision) == linked
    assert all(load_problem(root / name).settings.precision == "fp32" for name in linked)
    assert load_problem(root / "l2_2_matmul_scale_tiny").settings.precision == "bf16"
    assert sum(line.startswith("warning: ") and "keeps its precision fp32" in line for line in lines) == 2


def test_an_unknown_precision_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match=r"precision 'fp64' is not one evalkit judges in; give one of fp32, fp16, bf16"):
        import_kernelbench(KB, tmp_path / "problems", precision="fp64")
    assert not (tmp_path / "problems").exists()

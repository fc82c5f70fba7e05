"""Errors a KernelBench user hits that tests/cli/test_error_lines.py does not already cover: a reference whose
forward returns a Python number or another object that is not compared as a tensor (a tuple of tensors is fine),
and inputs too large for Triton's interpreter on a machine without a GPU. Each is one line on stderr, exit code 2,
from `run` and `resume` (and `eval` where it reads the problem), before anything is stored or changed.

Nothing here reaches a worker: typer's CliRunner in-process, about a second each.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session

from kernelsearch.config import parse_config
from kernelsearch.runner import check_problem
from kernelsearch.store.database import open_store
from kernelsearch.store.models import Run
from tests.cli.test_error_lines import (
    GOOD_PROBLEM,
    _file_problem_config,
    _write_config,
    invoke,
    one_error_line,
)
from tests.helpers import ONLINE

RETURNS = {
    "float": ("return torch.relu(x).sum().item()", "returns float, not a tensor or a tuple of tensors",
              "drop the .item()"),
    "float_in_tuple": ("return torch.relu(x), x.sum().item()", "returns a tuple whose item 1 is float",
                       "drop the .item()"),
    "dict": ("return {'y': torch.relu(x)}", "returns dict, not a tensor or a tuple of tensors"),
    "no_tensor": ("return (1, 2)", "returns a tuple with no tensor in it"),
}

# an own-only problem (its sizes are not module-level integers) of 2M input elements
LARGE = GOOD_PROBLEM.replace("return [torch.randn(4, 9)]", "return [torch.randn(2048, 1024)]")


def _stored_run(tmp: Path, data: dict, prob: Path) -> Path:
    """A store holding an interrupted run of `prob`, made while the file was good."""
    db = tmp / "ks.db"
    engine = open_store(db)
    with Session(engine) as s:
        s.add(Run(name="r", problem=str(prob), config_json=parse_config(data).model_dump_json(),
                  status="interrupted"))
        s.commit()
    engine.dispose()
    return db


def _status(db: Path) -> str:
    e = open_store(db, readonly=True)
    with Session(e) as s:
        status = s.get(Run, 1).status
    e.dispose()
    return status


@pytest.mark.parametrize("kind", list(RETURNS))
def test_a_reference_that_returns_no_tensor_is_one_line_from_run_and_resume(tmp_path, kind):
    body, *wanted = RETURNS[kind]
    prob = tmp_path / f"{kind}.py"
    prob.write_text(GOOD_PROBLEM)
    data = _file_problem_config(tmp_path, prob)
    db = _stored_run(tmp_path, data, prob)
    prob.write_text(GOOD_PROBLEM.replace("return torch.relu(x)", body))
    cfg = _write_config(tmp_path, {**data, "store": str(tmp_path / "new.db")})
    one_error_line(invoke("run", cfg), f"problem {kind}: the reference's forward", *wanted)
    assert not (tmp_path / "new.db").exists()
    one_error_line(invoke("resume", "r", "--db", db), f"problem {kind}", *wanted)
    assert _status(db) == "interrupted"


def test_a_reference_that_returns_a_tuple_of_tensors_is_accepted(tmp_path):
    prob = tmp_path / "pair.py"
    prob.write_text(GOOD_PROBLEM.replace("return torch.relu(x)", "return torch.relu(x), x * 2"))
    problem = check_problem(parse_config(_file_problem_config(tmp_path, prob)))
    assert problem.name == "pair"


def test_inputs_too_large_for_the_interpreter_are_one_line_from_eval_run_and_resume(tmp_path):
    prob = tmp_path / "large.py"
    prob.write_text(GOOD_PROBLEM)
    data = _file_problem_config(tmp_path, prob)   # device: cpu
    db = _stored_run(tmp_path, data, prob)
    prob.write_text(LARGE)
    wanted = ("problem large: its inputs are 2,097,152 elements (8 MB), too large for Triton's interpreter",
              "its sizes are not module-level integers", "device: cuda")
    cand = tmp_path / "cand.py"
    cand.write_text(ONLINE)
    one_error_line(invoke("eval", prob, cand, "--device", "cpu"), *wanted)
    cfg = _write_config(tmp_path, {**data, "store": str(tmp_path / "new.db")})
    one_error_line(invoke("run", cfg), *wanted)
    assert not (tmp_path / "new.db").exists()
    one_error_line(invoke("resume", "r", "--db", db), *wanted)
    assert _status(db) == "interrupted"


def test_a_large_problem_with_module_level_sizes_gets_an_interpreter_case_instead(tmp_path):
    prob = tmp_path / "sized.py"
    prob.write_text(GOOD_PROBLEM.replace("import torch.nn as nn\n", "import torch.nn as nn\n\nrows = 2048\n"
                                         "cols = 1024\n").replace("torch.randn(4, 9)", "torch.randn(rows, cols)"))
    problem = check_problem(parse_config(_file_problem_config(tmp_path, prob)))
    assert problem.cpu_timed_case().name != "own"

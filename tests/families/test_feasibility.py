"""Feasibility before evaluation (families/space.py `limits`, families/feasibility.py): a point the family's
space knows cannot run on an H200 at some shape case is never proposed by the offline provider and never reaches
the pool. The models' calibration against sm_90 compiles: bench/feasibility.py (slow; figures in the commit)."""
from __future__ import annotations

import pytest

from kernelsearch.families import load_family, load_problem
from kernelsearch.families.feasibility import STAGE, refuse_infeasible
from kernelsearch.judge.problem import family_names
from kernelsearch.judge.status import Status
from tests.search.fakes import FakePool, config, drive, new_run


@pytest.fixture(scope="module")
def rmsnorm():
    return load_problem("rmsnorm")


@pytest.mark.parametrize("warps", [1, 2, 4, 8, 16, 32])
def test_rmsnorm_eight_rows_are_refused_before_evaluation(rmsnorm, warps):
    # the H200 bench: 8 rows of 16384 a program crashed 6 of 8 points (the launcher's 65536 elements; below 16
    # warps they also spill at the 8192-wide fp32 cases)
    space = rmsnorm.family.SPACE
    point = {**space.default, "variant": "single", "ROWS": 8, "num_warps": warps}
    why = space.infeasible(point)
    assert why is not None
    result = refuse_infeasible(rmsnorm, space.render(point))
    assert result is not None and result.status is Status.compile_error and result.stage == STAGE
    assert "not evaluated" in result.reason and why in result.reason
    assert "registers" in why or "65536" in why
    wide = [c for c in rmsnorm.cases if c.name == "wide-fp16"]
    assert "over the launcher's 65536 elements" in space.infeasible(point, wide)   # the crash the bench saw


def test_a_feasible_point_is_accepted(rmsnorm):
    space = rmsnorm.family.SPACE
    # compiled for sm_90 at the 16384-wide case: 193 and 110 registers, no spill (bench/feasibility.py)
    for point in (space.default, {**space.default, "ROWS": 2, "num_warps": 8},
                  {**space.default, "ROWS": 2, "num_warps": 16}):
        assert space.infeasible(point) is None, point
        assert refuse_infeasible(rmsnorm, space.render(point)) is None


def test_only_an_exact_render_is_judged(rmsnorm):
    space = rmsnorm.family.SPACE
    bad = space.render({**space.default, "ROWS": 8})
    edited = bad.replace("rows = 8", "rows = 1")
    assert edited != bad
    assert refuse_infeasible(rmsnorm, edited) is None                       # the header no longer describes it
    assert refuse_infeasible(rmsnorm, bad.split("\n", 1)[1]) is None         # no header: the space cannot read it
    assert refuse_infeasible(rmsnorm, bad) is not None


def test_the_problems_cases_decide(rmsnorm):
    # a family at a model's shape has cases of its own: 8 narrow rows fit where the family's wide cases do not
    space = rmsnorm.family.SPACE
    point = {**space.default, "ROWS": 8, "num_warps": 16}
    narrow = [c for c in rmsnorm.cases if c.params["cols"] <= 1024]
    assert space.infeasible(point) is not None
    assert space.infeasible(point, narrow) is None


def test_cross_entropy_stages_past_shared_memory_are_refused():
    problem = load_problem("cross_entropy")
    space = problem.family.SPACE
    point = {**space.default, "variant": "online", "BLOCK": 32768, "num_warps": 32, "num_stages": 4}
    why = space.infeasible(point)
    assert why is not None and "shared memory" in why and "393216 B" in why
    assert space.infeasible({**point, "num_stages": 1}) is None
    assert refuse_infeasible(problem, space.render(point)).stage == STAGE


@pytest.mark.parametrize("name", family_names())
def test_every_starter_is_feasible_and_the_space_knows_the_family_cases(name):
    problem = load_family(name)
    space = problem.family.SPACE
    assert [c.name for c in space.cases] == [c.name for c in problem.cases]
    assert space.infeasible(space.default) is None


def test_offline_search_on_rmsnorm_never_proposes_an_infeasible_point(tmp_path):
    cfg = config(tmp_path, problem="rmsnorm", budgets={"evaluations": 60},
                 search={"ideas_per_round": 3, "branches_per_idea": 3, "rounds": 12})
    engine, rid = new_run(cfg.store, "feasible", cfg)
    pool = FakePool()
    events: list = []
    drive(cfg, engine, rid, pool, events)
    space = load_problem("rmsnorm").family.SPACE
    assert len(pool.codes) >= 20
    points = [space.params_of(c) for c in pool.codes]
    assert all(space.infeasible(p) is None for p in points), [p for p in points if space.infeasible(p)]
    assert {p["ROWS"] for p in points} - {1}, "packed rows (feasible at 16 warps and more) are still proposed"
    refused = [d for k, d in events if k == "evaluated" and "not evaluated" in (d["reason"] or "")]
    assert not refused


def test_controller_refuses_an_infeasible_kernel_without_the_pool(tmp_path):
    space = load_problem("rmsnorm").family.SPACE
    starter = tmp_path / "starter.py"
    starter.write_text(space.render({**space.default, "ROWS": 8}))
    cfg = config(tmp_path, problem="rmsnorm", starter=str(starter), budgets={"evaluations": 3},
                 search={"rounds": 1})
    engine, rid = new_run(cfg.store, "refused", cfg)
    pool = FakePool()
    events: list = []
    drive(cfg, engine, rid, pool, events)
    first = next(d for k, d in events if k == "evaluated" and d["kernel_id"] == 1)
    assert first["status"] == Status.compile_error and first["reason"].startswith("infeasible on an H200")
    assert starter.read_text() not in pool.codes
    assert not any(k == "evaluating" and d["kernel_id"] == 1 for k, d in events)


def test_matmul_warp_specialized_wide_tiles_on_4_warps_and_spilling_accumulators_are_refused():
    # sm_90 compiles with Triton 3.6 (bench/feasibility.py): the H200 search's point failed in NVGPUWarpSpecialization
    # at the bf16 timed case; the same tile compiles without warp specialization, on 8 warps, or 64 rows tall
    problem = load_family("matmul")
    space = problem.family.SPACE
    point = {**space.default, "variant": "tma", "warp_specialize": True, "BM": 128, "BN": 128, "BK": 64,
             "num_stages": 5, "num_warps": 4, "GROUP_M": 1, "epilogue_subtile": False}
    why = space.infeasible(point)
    assert why is not None and "warp specialization" in why
    assert refuse_infeasible(problem, space.render(point)).stage == STAGE
    for ok in ({"warp_specialize": False}, {"num_warps": 8}, {"BM": 64}, {"BM": 64, "BK": 128, "num_stages": 3}):
        assert space.infeasible({**point, **ok}) is None, ok
    assert space.infeasible({**point, "BM": 64, "BN": 256}) is not None
    # a 128 x 256 accumulator on 4 warps (256 fp32 a thread) spilled 2.8-4.2 KB at the timed case in every variant;
    # the fp32 and odd correctness cases spill nearly everywhere (the starter too) and refuse nothing
    # (`gemv` holds no such tile: it ignores the tile knobs, and is refused at the square timed case as not
    # matrix-vector)
    for variant in [v for v in space.params["variant"] if v != "gemv"]:
        wide = {**space.default, "variant": variant, "num_warps": 4, "num_stages": 3}
        assert "registers" in space.infeasible(wide), variant
        assert space.infeasible({**wide, "num_warps": 8}) is None, variant

"""The store functions the search controller reads and writes through, on an in-memory store."""
from __future__ import annotations

import pytest

from kernelsearch.store import Evaluation, Run, session_scope
from kernelsearch.store import queries as q
from kernelsearch.store.database import open_store


def test_the_controllers_reads_and_writes():
    engine = open_store("sqlite://")
    with session_scope(engine) as s:
        run = Run(name="w", problem="softmax", config_json="{}")
        s.add(run)
        s.flush()
        rid = run.id
        assert q.first_kernel(s, rid) is None
        k0 = q.add_kernel(s, rid, code="a", code_hash="ha", language="triton")
        call = q.add_llm_call(s, rid, {"role": "ideas", "provider": "offline", "model": "m", "tokens_in": 3})
        i1 = q.add_idea(s, rid, round=1, parent_kernel_id=k0, title="t", text="x", meta_json="{}",
                        llm_call_id=call, branches_wanted=2)
        k1 = q.add_kernel(s, rid, code="b", code_hash="hb", language="cuda", round=1, idea_id=i1,
                          parent_kernel_id=k0, branch=1)
        k2 = q.add_kernel(s, rid, code="c", code_hash="hc", language="triton", round=1, idea_id=i1, branch=0)
        s.add(Evaluation(kernel_id=k0, status="ok", time_ms=1.0, ref_time_ms=1.0, speedup=1.0))
        s.add(Evaluation(kernel_id=k1, status="incorrect", reason="values off"))
    with session_scope(engine) as s:
        assert q.first_kernel(s, rid).id == k0 and q.get_kernel(s, k1).language == "cuda"
        assert [k.id for k in q.queued_kernels(s, rid)] == [k2]
        assert [(k.id, e.status) for k, e in q.correct_kernels(s, rid)] == [(k0, "ok")]
        assert [k.id for k in q.best_kernels(s, rid)] == [k0] and q.has_correct(s, rid)
        assert q.run_codes(s, rid) == ["a", "b", "c"] and q.run_codes(s, rid, before_round=1) == ["a"]
        assert q.kernel_with_hash(s, rid, "hb") == k1 and q.kernel_with_hash(s, rid, "hz") is None
        assert q.branches_written(s, rid, 1) == {(i1, 0), (i1, 1)}
        assert [e.reason for e in q.failed_evaluations_of_idea(s, i1)] == ["values off"]
        [(idea, evs)] = q.ideas_with_evaluations(s, rid)
        assert idea.id == i1 and [e.kernel_id for e in evs] == [k1]
        assert [i.id for i in q.open_ideas(s, rid, 1)] == [i1]
        q.mark_ideas_coded(s, [i1])
        q.save_elapsed(s, rid, 12.5)
    with session_scope(engine) as s:
        assert q.open_ideas(s, rid, 1) == [] and q.run_elapsed(s, rid) == 12.5
        q.finish_run(s, rid, "rounds_done", 20.0)
    with session_scope(engine) as s:
        run = s.get(Run, rid)
        assert (run.status, run.stop_reason, run.elapsed_s) == ("finished", "rounds_done", 20.0)
        assert run.finished_at is not None
        q.interrupt_run(s, rid, "auth_error", 21.0)
    with session_scope(engine) as s:
        assert (s.get(Run, rid).status, s.get(Run, rid).stop_reason) == ("interrupted", "auth_error")
    engine.dispose()


def test_a_retiming_is_a_row_beside_the_verdict_never_queued_work_nor_a_verdict():
    engine = open_store("sqlite://")
    with session_scope(engine) as s:
        run = Run(name="r", problem="softmax", config_json="{}")
        s.add(run)
        s.flush()
        rid = run.id
        k0 = q.add_kernel(s, rid, code="a", code_hash="ha", language="triton")
        k1 = q.add_kernel(s, rid, code="b", code_hash="hb", language="triton")
        q.add_evaluation(s, Evaluation(kernel_id=k0, status="ok", time_ms=2.0, ref_time_ms=2.0, speedup=1.0))
        q.add_evaluation(s, Evaluation(kernel_id=k1, status="harness_error", reason="oom"))
    with session_scope(engine) as s:
        q.add_evaluation(s, Evaluation(kernel_id=k0, status="ok", time_ms=1.0, ref_time_ms=3.0, purpose=q.RETIME))
        q.add_evaluation(s, Evaluation(kernel_id=k0, status="harness_error", reason="oom", purpose=q.RETIME))
    with session_scope(engine) as s:
        assert q.get_evaluation(s, k0).time_ms == 2.0                       # the verdict, not a re-timing
        assert [e.time_ms for e in q.retimings(s, k0)] == [1.0, None]
        assert q.queued_kernels(s, rid) == []
        assert [k.id for k, _ in q.unjudged_kernels(s, rid)] == [k1]        # the re-timing's harness_error is not
        assert [k.id for k, _ in q.correct_kernels(s, rid)] == [k0]
        st = q.run_stats(s, rid)
        assert (st.evaluations, st.retimes, st.queued) == (2, 2, 0)
        with pytest.raises(ValueError, match="already has an evaluation"):
            q.add_evaluation(s, Evaluation(kernel_id=k0, status="ok"))
        with pytest.raises(ValueError, match="purpose"):
            q.add_evaluation(s, Evaluation(kernel_id=k0, status="ok", purpose="bogus"))
    engine.dispose()

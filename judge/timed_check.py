"""The timing loop's output check: every output of a candidate's timed batch against the reference on that call's
inputs, with the candidate's runner frozen (judge/clock.py runs the loop)."""
from __future__ import annotations

import contextlib

import torch

from kernelsearch.judge import correctness, wire
from kernelsearch.judge.client import RunnerClient
from kernelsearch.judge.conversation import Conversation
from kernelsearch.judge.correctness import COMPARE_CHUNK, agreement, compare
from kernelsearch.judge.numerics import references
from kernelsearch.judge.status import CandidateFailure, Status


def decoded_outs(talk: Conversation, r: RunnerClient, reply: dict, bufs: list, n: int) -> list | None:
    """A trusted runner's outputs of a batch's n calls, decoded; None where they are not n well-formed values (the
    check then computes each call's reference itself)."""
    outs = reply.get("outs")
    if not isinstance(outs, list) or len(outs) != n:
        return None
    try:
        return [wire.decode(o, bufs, talk.device, r.ipc) for o in outs]
    except wire.WireError:
        return None


def check_batch(talk: Conversation, r: RunnerClient, reply: dict, bufs: list, inputs_of, b: int, n: int, ref,
           eager_outs: list | None, atol: float, rtol: float, chunk: int = COMPARE_CHUNK) -> None:
    """Every output of the candidate's timed batch against the reference on that call's inputs (runner frozen).

    The batch's first call's structure (types, shapes, dtypes, devices) is checked by `compare` against the eager
    reference's output of the same call (its values too, in full against the judge's own reference, where eager's
    outputs are missing); every call's values by `agreement` with the eager reference's output of the same call in
    the same batch (its runner is trusted, never loaded the candidate, and ran the same inputs), whose yes/no stays on
    the device until one read for the whole batch. (The first call's full compare, a float64 copy of each side and
    about twenty passes, plus its own reference's inputs and forward, cost about as much as the other fifteen calls'
    agreements once these were one pass each: judge/agree.py.) A call that disagrees is then judged by `compare`
    against the judge's own reference, which decides (an honest output a hair outside the tolerance of eager's
    rounded one passes there).
    Reading eager's outputs instead of recomputing each call's reference here takes the inputs' generation and a
    forward of the reference per call out of the exclusive lease (a synchronisation and a deep copy per call once
    cost 10 ms a call on an H200: 1.46 s of a softmax evaluation's 1.89 s timing loop). Where eager's outputs are
    missing (None), each call's float32 reference is computed here as before."""
    try:
        outs = reply.get("outs")
        if not isinstance(outs, list) or len(outs) != n:
            got_n = len(outs) if isinstance(outs, list) else "no"
            raise CandidateFailure(Status.crash, f"a timed batch returned {got_n} outputs for {n} calls",
                                   stage="timing")

        def fail_if_wrong(k: int, got) -> object:
            # float32 is enough here: precision was judged in correctness against float64; a timed output is checked
            # for being this call's answer at all (skipped, stale or unfinished work is far off)
            want, want_hi = references(ref, inputs_of(b, k), torch.float32)
            cmp = compare(got, want, want_hi, atol, rtol, chunk)
            if not cmp.ok:
                raise CandidateFailure(Status.incorrect, f"a timed call's output (call {k} of a batch of {n}) is "
                                       f"wrong: {cmp.reason}", cmp.detail or None, stage="timing")
            return want

        like, flags, gots = None, [], {}
        for k, obj in enumerate(outs):
            try:
                got = wire.decode(obj, bufs, talk.device, r.ipc)
            except wire.WireError as err:
                raise CandidateFailure(Status.crash, f"a timed call's output is malformed: {err}",
                                       stage="timing") from None
            flag = None
            if like is None and eager_outs is not None and compare(got, eager_outs[k], eager_outs[k], atol, rtol,
                                                                   values=False).ok:
                like = eager_outs[k]   # eager's structure: this call's values by `agreement` too, as every other's
            if like is not None:
                with torch.no_grad():
                    want32 = eager_outs[k] if eager_outs is not None else references(
                        ref, inputs_of(b, k), torch.float32)[1]
                    flag = agreement(got, like, want32, atol, rtol, chunk)
            if flag is None:
                like = fail_if_wrong(k, got)
            else:
                flags.append(flag)
                gots[len(flags) - 1] = (k, got)
        while correctness._ONE_PASS_ERRORS:   # the one-pass kernel failed here: said in the plan's notes, once
            talk.mem.note("timing: the outputs' one-pass check fell back to torch: "
                          + correctness._ONE_PASS_ERRORS.pop())
        if flags:
            ok = torch.stack(flags).cpu()   # the batch's one read
            for i in (~ok).nonzero().flatten().tolist():
                fail_if_wrong(*gots[i])   # `compare` decides: within its float64 arithmetic a borderline value passes
    finally:
        with contextlib.suppress(Exception):
            r.thaw()

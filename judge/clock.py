"""The judge's clock: how the judge times a candidate whose launches happen in another process.

The judge's own wall clock (perf_counter) spans a batch: the judge sends `batch`, the runner runs n calls and
synchronizes the device, the judge receives the reply. Each side (the candidate, the eager reference, torch.compile
where asked) runs the same batches in its own runner; the reference's runners never loaded the candidate; sides
alternate which goes first. What makes the reading honest:
- n distinct input sets per batch, fresh each batch (every slot rewritten by the judge, with the candidate's
  process frozen, SIGSTOP, so nothing it runs on the host sees the new inputs before its clock starts), so no
  answer computed earlier is right, and together they are far larger than the L2;
- every output of every timed call is read by the judge and compared, with the candidate frozen (on a GPU in place
  through CUDA IPC): a call skipped, or finished after the runner said it was done, is `incorrect`;
- the runner's describe step (handing over its outputs) is charged to the candidate as far as it takes longer than
  the reference's own (median over batches), so computing outputs when they are asked for pays; where every side
  replays a CUDA graph (below) its outputs are the graph's, described once, and each runner is frozen at its batch's
  reply: no step of the candidate's follows its batch;
- on a GPU each side's n calls are captured once into one CUDA graph and each batch replays it, so the clock times
  the kernels, not the host's launch overhead (a forward that cannot be captured is timed by an eager loop, its
  launch overhead included, and the detail says so);
- just before its batch each runner is pinged (a one-element device op and a synchronize), so the GPU switches to
  its context before the clock starts (the switch cost 0.5-0.8 ms a batch on an H200); a ping that takes the
  candidate longer than the reference's is charged to it, so work started then is on the clock;
- the references, whose runners are trusted, are charged their CUDA-event time, and the wall time they took beyond
  it (socket round trip, graph launch, waking the runner, synchronize) is recorded as `overhead_ms`; the candidate is
  charged its wall time less that overhead (median over batches), at least the fixed cost of an empty batch on the
  reference's runner and at most GRAPH_LAUNCH_CAP more, and less its own runner's overhead (its wall time beyond the
  events it records the same way) where that is smaller: its own word can lower its credit, never raise it.
Per-call time is that over n, the median of the fastest half of 4 to 12 batches (until the spread is under 2 %). What a
candidate could still gain is a batch overhead smaller than an honest runner's, at most the fixed cost
(docs/anticheat.md).
On the CPU (Triton's interpreter) the same loop runs without graphs; its times rank kernels for the interpreter.
"""
from __future__ import annotations

import contextlib
import gc
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable, ContextManager

import torch

from kernelsearch.judge import charges, wire
from kernelsearch.judge.conversation import Conversation
from kernelsearch.judge.correctness import COMPARE_CHUNK
from kernelsearch.judge.family import Case
from kernelsearch.judge.memory import TIMING_MIN_CALLS, calls_that_fit, timing_calls
from kernelsearch.judge.quiet import is_candidate as _is_cand
from kernelsearch.judge.quiet import quiet_device, settle_device
from kernelsearch.judge.seeds import derive_seed
from kernelsearch.judge.timed_check import check_batch, decoded_outs
from kernelsearch.judge.timing import side_order

# One side's batch's inputs + outputs (GPU), n at most `timing_iters` (128). H100, each starter 5 times alone: 8 GiB
# and 50 calls (softmax 16, 3 ms a batch; rmsnorm 50, 2.4 ms) read 1.56 % and 2.52 % apart, 16 GiB and 128 (6 ms) 1.47 %
# and 0.64 %; not the default: one of its two concurrency-8 runs lost 8 of 16 evaluations out of memory (unmeasured
# since every runner is closed inside the timing lease and the priming inputs are one set)
BATCH_BYTES = int(float(os.environ.get("KS_CLOCK_BATCH_GB", "8")) * 2**30)
MIN_CALLS = TIMING_MIN_CALLS
# H100, one softmax kernel in 5 evaluations of 6 batches (16 calls, ~4.3 ms a batch): its batches varied 6.5 % within
# an evaluation and its median 6.5 % between evaluations, the reference's (CUDA events) 0.3 %; a candidate's reading is
# its batch's wall time, whose host overhead (0.47-0.63 ms a batch) only adds. So more batches, and the median of the
# fastest half (`low`)
MIN_BATCHES, MAX_BATCHES = (int(v) for v in os.environ.get("KS_CLOCK_BATCHES", "4:12").split(":"))
TARGET_SPREAD = float(os.environ.get("KS_CLOCK_TARGET_SPREAD", "0.02"))
CPU_BATCHES = (1, 2)   # Triton's interpreter: its times rank kernels for the interpreter only
FIXED_COST_SAMPLES = 7
# Long batches stop sooner: once every side has been in every place of the order twice (2 x sides batches,
# timing.side_order) and the batches took LONG_LOOP_S together, the loop stops at the target spread or not. Host
# jitter (+-0.3 ms a batch, H100) is then under 0.2 % of a batch; what spreads them is the device's own state: a
# compute-bound side ran 4-5 % slower after a side that drew more power (KernelBench matmuls, H100, 2026-12-07: eager
# 107 / 112 ms a batch by its predecessor), which more batches do not remove. Those evaluations ran all 12 batches,
# 5 s of the device's one timing stage (a pointwise one's 0.3 s). Replayed on their stored batches: the speedup over
# eager after 7 or 8 batches (where 3 s stops them) within 0.6 % of the 12-batch figure, after 6 within 1.6 %.
LONG_LOOP_S = float(os.environ.get("KS_CLOCK_LONG_LOOP_S", "3"))


@dataclass(frozen=True)
class TimingResult:
    """What the clock hands the harness: each side's per-call time on the timed case, and what the roofline needs."""
    time_ms: float                        # the candidate's per call (median over batches, side steps charged)
    ref_time_ms: float                    # the eager reference's, on the same clock
    speedup: float | None                 # ref_time_ms / time_ms; None where time_ms is 0
    compile_ref_time_ms: float | None     # torch.compile's reference, where it was timed (compare_compile, GPU)
    speedup_compile: float | None         # compile_ref_time_ms / time_ms; None where either is missing or 0
    case: Case                            # the timed case
    in_bytes: int                         # one call's inputs
    out_bytes: int                        # one call's outputs (the reference's)
    timings: dict[str, dict]              # per side: median_ms, spread, batches, calls_per_batch, min_ms, max_ms
    ceilings: dict | None = None          # the device's measured ceilings (GPU), measured holding it alone
    group: tuple = ()                     # a re-timing group's other candidates' TimingResults, in `others` order


def _nbytes(values) -> int:
    return sum(t.numel() * t.element_size() for t in wire.flat_tensors(values))


def time_sides(talk: Conversation, *, secret: int, tolerance: Callable[[Case], tuple[float, float]],
               lease: Callable[[str], ContextManager], detail: dict, others: tuple = ()) -> TimingResult:
    """Time the candidate (`talk.cand`) against the reference(s) in runners of its own, on the timed case.

    `secret` is the evaluation's seed; `tolerance(case)` the timed outputs' (atol, rtol); `lease(kind)` holds the
    device ("shared" or "exclusive"); the timing plan and the loop's laps are written into `detail`. `others`: a
    re-timing group's further candidates' runners (judge/group.py), timed in the same loop, each batch's sides
    interleaved, on the same inputs and against the same reference batches; their results are the result's `group`."""
    cuda = talk.mode == "cuda"
    problem, mem, settings = talk.problem, talk.mem, talk.settings
    case = problem.timed_case if cuda else problem.cpu_timed_case()
    seed = derive_seed(secret, "timing")
    atol, rtol = tolerance(case)   # the problem's, or eager's own error where that decided correctness

    def inputs_of(b: int, k: int) -> list:
        return problem.build_inputs(case, derive_seed(seed, b, k), talk.device)

    mem.doing = f"the timing stage's inputs, slots and output checks on {case.describe()}"
    probe = inputs_of(-2, 0)
    in_bytes = _nbytes(probe)
    sides = {"candidate": talk.cand, **{f"candidate#{i}": r for i, r in enumerate(others, start=1)}}
    sides["eager"] = talk.runner("reference")
    cands = [name for name in sides if _is_cand(name)]
    talk.ask(sides["eager"], {"op": "load", "role": "reference", "problem": problem.ref},
             "loading the reference", "timing")
    if settings.compare_compile and cuda:
        sides["compile"] = talk.runner("reference")
        talk.ask(sides["compile"], {"op": "load", "role": "reference", "problem": problem.ref},
                 "loading the reference", "timing")
    ref = talk.build(case, seed, "timing", [(r, "compile" if name == "compile" else "eager")
                                            for name, r in sides.items()])
    with torch.no_grad():
        out_bytes = _nbytes(ref(*probe))
    stage_s = detail.setdefault("stage_s", {})
    ref_cached, call_ms = 0, None
    # Each reference's first call, here under a shared lease and not inside the `timing` lease below, where every
    # other evaluation's timing stage waits: torch.compile compiles on it (seconds, less from Inductor's cache), eager
    # sets up its libraries' handles. The memory it leaves cached in the runners (trusted: reference code) is counted
    # as free when the batches are sized, since their slots are allocated from it first. (The same steps on the CPU,
    # where they cost a reference call, so that one path is tested everywhere.)
    t_warm = time.perf_counter()
    with lease("shared"):
        for name, r in sides.items():
            if not _is_cand(name):
                talk.put(r, 0, probe, "timing")
                talk.ask(r, {"op": "batch", "slots": [0], "n": 1}, "the reference's first call", "timing")
                if name == "eager" and cuda:   # a second call, timed by its (trusted) events: how many calls a batch
                    done, _ = talk.ask(r, {"op": "batch", "slots": [0], "n": 1, "events": True}, "a call", "timing")
                    call_ms = done.get("event_ms") if type(done.get("event_ms")) in (int, float) else None
                reply, _ = talk.ask(r, {"op": "release"}, "releasing the first call's memory", "timing")
                ref_cached += max(0, int(reply.get("cached") or 0))
    stage_s["timing_ref_warm"] = round(time.perf_counter() - t_warm, 3)
    del probe
    # One timing stage's batches on a device at a time, from sizing them to the memory it finds free until they are
    # freed (`timing`, sandbox/admission.py): two stages sizing at once each counted the other's share as free
    with lease("timing"):   # its wait is the judge's `wait_timing` (judge/waits.py)
        # as many calls as fit on the device beside the judge's check, every side holding n input sets and outputs
        # (judge/memory.py); under MIN_CALLS only where two do not fit, with a note
        free, _ = mem.free()
        free += ref_cached
        if "compile" in sides and calls_that_fit(in_bytes, out_bytes, len(sides), free) < 1 <= calls_that_fit(
                in_bytes, out_bytes, len(sides) - 1, free):
            # one call on three sides does not fit (KernelBench's 6 GiB inputs on an H100: 3 x 14 GiB of slots beside
            # the judge's 34 ran the device out of memory), on two it does: torch.compile is not timed, and said so
            sides.pop("compile").close()
            detail["compile_not_timed"] = (f"one call's inputs and outputs on three sides "
                                           f"({3 * (in_bytes + out_bytes) / 2**30:.1f} GiB) do not fit beside the "
                                           f"judge's check in {free / 2**30:.1f} GiB free: torch.compile not timed")
        n, note = timing_calls(in_bytes, out_bytes, len(sides), free, settings.timing_iters if cuda else
                               min(settings.timing_iters, 3), BATCH_BYTES, MIN_CALLS, call_ms)
        batches = (MIN_BATCHES, MAX_BATCHES) if cuda else CPU_BATCHES
        mem.record()["timing"] = {"calls_per_batch": n, "sides": len(sides), "free_mb": round(free / 2**20, 1),
                                  "ref_call_ms": call_ms}
        if note:
            mem.note(f"timing: {note}")
        chunk = mem.plans[case.name].chunk if case.name in mem.plans else COMPARE_CHUNK
        plan = {"calls_per_batch": n, "in_bytes": in_bytes, "out_bytes": out_bytes, "graphs": {}}
        detail["timing_plan"] = plan
        t_stage = time.perf_counter()
        laps = {"refill": 0.0, "batches": 0.0, "check": 0.0}   # where the stage's time goes (stage_s)
        views: dict[str, list] = {}
        described: dict[str, tuple] = {}
        with lease("shared"):   # slots, graphs and a priming batch (Triton's JIT, torch.compile) beside other checks
            # one input set in every slot for the capture and the priming batch (each batch refills them all): n
            # sets at once were n inputs' bytes in the judge's own cache for the rest of its evaluation
            first = [inputs_of(-1, 0)] * n
            for name, r in sides.items():   # each step's time in stage_s (timing_prep_*): what the stage holds
                with _lap(laps, "prep_slots"):
                    views[name] = talk.put_many(r, first, "timing")
                if cuda:
                    with _lap(laps, "prep_graph"):
                        reply, _ = talk.ask(r, {"op": "graph", "slots": [*range(n)]}, "capturing a graph", "timing")
                    plan["graphs"][name] = True if reply.get("graph") else f"no: {str(reply.get('why'))[:400]}"
                with _lap(laps, "prep_prime"):
                    talk.ask(r, {"op": "batch", "slots": list(range(n)), "n": n}, "a priming batch", "timing")
                if cuda:   # a ping and a describe, untimed: each side's first ones cost more than every later one
                    # (H100, rmsnorm: the candidate's first ping 10 ms against 0.3 later, its first describe 4 ms
                    # against 0.5: the first torch op in its process loads its module; the outputs' first IPC
                    # export), which made the first timed batch read 5x slow and every loop run all 12 batches
                    with _lap(laps, "prep_describe"):
                        talk.ask(r, {"op": "ping"}, "a priming ping", "timing")
                        described[name] = talk.ask(r, {"op": "describe"}, "describing the priming batch", "timing")
            del first
            # Every side replays a graph: its outputs are the graph's, in the same memory every batch, so they are
            # described once, here, and each side is frozen at its batch's reply: no describe step in the loop, whose
            # host jitter beside the reference's was charged to the candidate (judge/charges.py). A candidate that
            # said it captured a graph and writes its outputs elsewhere leaves the described ones stale: `incorrect`.
            once = cuda and all(g is True for g in plan["graphs"].values())
            static = {k: d for k, d in described.items() if once}
            plan["described_once"] = once
            fixed = 0.0
            if cuda:   # the fixed cost of a batch, on the reference's runner: an empty batch's round trip
                samples: dict[int, float] = {}
                for i in range(FIXED_COST_SAMPLES):
                    with _lap(samples, i):
                        talk.ask(sides["eager"], {"op": "batch", "slots": [], "n": 0}, "an empty batch", "timing")
                fixed = statistics.median(samples.values())
                plan["fixed_ms"] = round(fixed * 1e3, 4)
        per_call: dict[str, list[float]] = {k: [] for k in sides}
        overheads: list[float] = []
        # per candidate, per batch: its (ping + describe) - the reference's; its batch on the judge's clock; its wall
        # beyond its (untrusted) events, or None
        side_steps: dict[str, list[float]] = {c: [] for c in cands}
        steps: dict[str, list] = {"pings_ms": [], "describes_ms": []}   # per batch, per side (the plan: why it moved)
        # per side, per batch: its wall time on the judge's clock and its CUDA-event time (a candidate's: its own
        # word, kept only to tell, between two evaluations of one kernel, the device's time from the host's)
        raw: dict[str, dict[str, list]] = {k: {"wall_ms": [], "events_ms": []} for k in sides}
        cand_walls: dict[str, list[float]] = {c: [] for c in cands}
        cand_owns: dict[str, list[float | None]] = {c: [] for c in cands}
        # The whole loop holds the device alone, one exclusive lease (per batch, the refills and checks shared: on an
        # H200 8.7 evaluations a minute against 11.2, each batch queueing behind other candidates' exclusive work).
        # The candidate's process is frozen from the refill until its ping, and from its describe until its outputs
        # are read, so it never runs while fresh inputs wait for it.
        ceil: dict | None = None
        t_wait = time.perf_counter()
        with lease("exclusive"), _loop_guard(sides):
            laps["lease_wait"] = time.perf_counter() - t_wait
            for b in range(batches[1]):
                if cuda:   # the device quiet before the inputs are written (judge/quiet.py settle_device)
                    plan["busy_probes"] = plan.get("busy_probes", 0) + settle_device()
                with _lap(laps, "refill"):
                    delivery = _refill(talk, sides, views, inputs_of, b, n)
                if cuda and ceil is None:
                    from kernelsearch.judge.roofline import ceilings

                    ceil = ceilings("cuda")   # measured once per device, only while holding it alone
                with _lap(laps, "batches"):
                    clock, events, pings, cand_out, eager_outs = _timed_batch(talk, sides, b, n, static)
                steps["pings_ms"].append({k: round(v * 1e3, 4) for k, v in pings.items()})
                for name, (t_batch, _) in clock.items():   # events: ms where a runner replied a number (its word)
                    raw[name]["wall_ms"].append(round(t_batch * 1e3, 4))
                    raw[name]["events_ms"].append(e if type(e := events.get(name)) in (int, float) else None)
                steps["describes_ms"].append({k: round(v[1] * 1e3, 4) for k, v in clock.items()})
                # the reference's runners are trusted: their wall time beyond their CUDA-event time is recorded
                ev = events.get("eager")
                overheads.append(clock["eager"][0] - ev / 1e3 if cuda and isinstance(ev, (int, float)) else fixed)
                for name, (t_batch, t_desc) in clock.items():
                    if _is_cand(name):
                        side_steps[name].append((pings[name] - pings["eager"]) + (t_desc - clock["eager"][1])
                                                + delivery.get(name, 0.0) - delivery.get("eager", 0.0))
                        cand_walls[name].append(t_batch)
                        ev_c = events.get(name)
                        valid = cuda and isinstance(ev_c, (int, float)) and 0.0 < ev_c / 1e3 <= t_batch
                        cand_owns[name].append(t_batch - ev_c / 1e3 if valid else None)
                        if cuda:   # the loop's stopping rule reads what will be reported
                            per_call[name] = charges.batch_times(cand_walls[name], cand_owns[name], overheads, fixed, n)
                        else:
                            per_call[name].append(max(t_batch - fixed, 0.0) * 1e3 / n)
                    elif cuda and isinstance(events.get(name), (int, float)):
                        per_call[name].append(events[name] / n)
                    else:
                        per_call[name].append(max(t_batch - fixed, 0.0) * 1e3 / n)
                with _lap(laps, "check"):
                    for c in cands:
                        check_batch(talk, sides[c], *cand_out[c], inputs_of, b, n, ref, eager_outs, atol, rtol, chunk)
                del cand_out, eager_outs
                long = b + 1 >= 2 * len(sides) and laps["batches"] >= LONG_LOOP_S
                if b + 1 >= batches[0] and all(charges.side_settled(per_call[c], side_steps[c], n) for c in cands) and (
                        long or all(charges.spread(v) <= TARGET_SPREAD for v in per_call.values())):   # charges.py
                    break
        # every side's runner ends inside the `timing` lease: nothing later asks them, and their slots and graphs
        # held past it were beside the next stage's (H100, 16 GiB a side, concurrency 8: 8 of 16 out of memory)
        del views, static, described
        with _lap(laps, "close"):
            for r in sides.values():
                r.close()
    plan["overhead_ms"] = round(statistics.median(overheads) * 1e3, 4) if overheads else None
    figures: dict[str, float] = {}
    for c in cands:   # each candidate charged as one alone is, against the same reference batches
        figures[c] = _charge(per_call, c, overheads, cand_walls[c], cand_owns[c], side_steps[c], fixed, n, cuda,
                             plan if c == "candidate" else plan.setdefault("group", {}).setdefault(c, {}))
    stage_s["timing_loop"] = round(time.perf_counter() - t_stage, 3)
    stage_s.update({f"timing_{k}": round(v, 3) for k, v in laps.items()})
    plan.update(steps)
    plan["batches_ms"] = raw
    med = {k: charges.low(v) for k, v in per_call.items() if not _is_cand(k)}   # every side by the same estimator
    compile_ms = med.get("compile")

    def result(c: str, group: tuple = ()) -> TimingResult:
        cand_ms = figures[c]
        rows = {"candidate": per_call[c], **{k: v for k, v in per_call.items() if not _is_cand(k)}}
        return TimingResult(
            time_ms=cand_ms, ref_time_ms=med["eager"], speedup=med["eager"] / cand_ms if cand_ms > 0 else None,
            speedup_compile=compile_ms / cand_ms if compile_ms is not None and cand_ms > 0 else None, group=group,
            compile_ref_time_ms=compile_ms, case=case, in_bytes=in_bytes, out_bytes=out_bytes, ceilings=ceil,
            timings={k: {"median_ms": cand_ms if k == "candidate" else med[k], "spread": charges.spread(v),
                         "batches": len(v), "calls_per_batch": n, "min_ms": min(v), "max_ms": max(v)}
                     for k, v in rows.items()})
    return result("candidate", tuple(result(c) for c in cands[1:]))


def _charge(per_call: dict, c: str, overheads: list, walls: list, owns: list, side_steps: list, fixed: float,
            n: int, cuda: bool, plan: dict) -> float:
    """Candidate `c`'s per-batch times (into per_call[c]) and its figure (ms a call), with what was charged in
    `plan`."""
    if cuda and overheads and walls:
        # The candidate is charged its batch's wall time less the eager reference's per-batch overhead (its wall time
        # beyond its CUDA-event time: round trip, graph launch, wake-up, synchronize; median over the batches), not
        # less the empty batch's round trip, which launches no graph and waits for no work: that left ~0.25 ms a
        # batch of an honest runner's launch cost on the candidate (H200: +8.6 % softmax, +11.3 % rmsnorm against
        # do_bench). The reference's runner is trusted and never loaded the candidate: a candidate gains at most
        # what an honest runner pays, and never more than GRAPH_LAUNCH_CAP beyond the empty batch (work of the
        # candidate's still on the device while the reference's batch waits would otherwise be credited to it).
        charged, own = charges.batch_credit(overheads, [o for o in owns if o is not None], fixed)
        if own is not None:
            plan["cand_overhead_ms"] = round(own * 1e3, 4)
        plan["charged_overhead_ms"] = round(charged * 1e3, 4)
        per_call[c] = charges.batch_times(walls, owns, overheads, fixed, n)
    # a ping or a describe that takes the candidate longer than the reference is charged: work done then (outputs
    # computed early or late) is on the clock (judge/charges.py says how)
    plan["side_steps_ms"] = [round(v * 1e3, 4) for v in side_steps]
    per_call[c], cand_ms, charge = charges.candidate_figure(per_call[c], side_steps, n)
    plan["side_step_charge_ms"] = round(charge, 5)
    return cand_ms


def _timed_batch(talk: Conversation, sides: dict, b: int, n: int, static: dict):
    """Each side's ping, batch and describe, on the judge's clock; a candidate is thawed just before its ping and
    frozen again after its describe (a side in `static`, whose outputs were described once: frozen at its batch's
    reply, not asked again). Returns the clock readings, the references' event times, the pings, each candidate's
    describe reply with its buffers, and the eager reference's outputs of the same calls (decoded: on a GPU views of
    its runner's memory, valid until its next batch). Every side's batch waits for a quiet device (a re-timing
    group's since 2026-12-06: one candidate's work left running would slow the next one's batch; alone, the
    references' only until 2026-12-07: the judge's probe just before each of theirs made a reference's ping 0.1-0.2
    ms faster than the candidate's in the same place, H100, and the candidate paid the difference as a side step)."""
    clock: dict[str, tuple[float, float]] = {}
    eager_outs: list | None = None
    events: dict[str, float | None] = {}
    pings: dict[str, float] = {}
    cand_out: dict[str, tuple] = {}
    for name in side_order(list(sides), b):
        r = sides[name]
        if talk.mode == "cuda":
            quiet_device(talk, sides)   # every candidate is frozen here: nothing of one may still run on the device
        r.thaw()   # every side frozen (SIGSTOP) from its refill until here: each ping includes the same wake-up
        tp = time.perf_counter()
        talk.ask(r, {"op": "ping"}, "a ping", "timing")
        t0 = time.perf_counter()
        pings[name] = t0 - tp
        done, _ = talk.ask(r, {"op": "batch", "slots": list(range(n)), "n": n, "events": True},
                           "a timed batch", "timing")
        t1 = time.perf_counter()
        events[name] = done.get("event_ms")   # the candidate's is its word: it can only lower its credit (above)
        reply, bufs = static.get(name) or talk.ask(r, {"op": "describe"}, "describing a timed batch", "timing")
        t2 = time.perf_counter()
        r.freeze()   # nothing runs in a candidate's process until its outputs are read; the references' alike
        if _is_cand(name):
            talk.advisories(done, "a timed batch", "timing")
            cand_out[name] = (reply, bufs)
        elif name == "eager":
            eager_outs = decoded_outs(talk, r, reply, bufs, n)
        clock[name] = (t1 - t0, t2 - t1)
        del reply, bufs
    return clock, events, pings, cand_out, eager_outs


def _refill(talk: Conversation, sides: dict, views: dict, inputs_of, b: int, n: int) -> dict[str, float]:
    """Fresh inputs in every slot of every side (on a GPU written in place by the judge); the candidate is left
    frozen, until its ping. Returns each side's delivery time on the judge's clock where the runner itself receives
    the inputs (the CPU: its process decodes them, and the candidate's code could work then): the candidate's beyond
    the reference's is charged with its ping and describe, so no work of its is off the clock."""
    if talk.mode == "cuda":
        _freeze_all(sides)   # thawed by _timed_batch just before each one's ping
        for k in range(n):
            x = inputs_of(b, k)
            for name in sides:
                for view, v in zip(views[name][k], x):
                    if isinstance(v, torch.Tensor):
                        view.copy_(v)
            del x
        torch.cuda.synchronize()
        return {}
    took = dict.fromkeys(sides, 0.0)
    for name, r in sides.items():
        if not _is_cand(name):
            r.thaw()   # frozen since its last describe: here it receives the inputs itself
    for k in range(n):
        x = inputs_of(b, k)
        for name, r in sides.items():
            t0 = time.perf_counter()
            talk.put(r, k, x, "timing")
            took[name] += time.perf_counter() - t0
    _freeze_all(sides)
    return took


@contextlib.contextmanager
def _lap(laps: dict, key):
    """Adds the time the block took to laps[key]."""
    t0 = time.perf_counter()
    yield   # a block that raises is not counted
    laps[key] = laps.get(key, 0.0) + time.perf_counter() - t0


@contextlib.contextmanager
def _loop_guard(sides: dict):
    """Around the timing loop: the judge's collector paused (a full collection, 0.1 s, inside a batch's wall time is
    charged to its side), and the references' runners thawed however it ends (a frozen one keeps its context)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
        for name, r in sides.items():
            if not _is_cand(name):
                r.thaw()


def _freeze_all(sides: dict) -> None:
    """Every side's runner frozen until _timed_batch thaws each before its ping (the references' as the candidate's,
    since 2026-12-06, so every side's ping includes the same wake-up); a reference's is thawed after the loop."""
    for r in sides.values():
        r.freeze()

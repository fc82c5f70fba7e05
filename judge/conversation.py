"""The judge's conversation with its runners: what it says to them and how it reads their replies.

One `Conversation` per evaluation, used by the harness (correctness) and the clock (timing): it starts runners
(`runner`), asks them (`ask`: a runner's failure is the candidate's `CandidateFailure`, an allocation the judge sized
that runs out of memory the harness's), builds the reference here and each runner's model with the same weights
(`build`), hands a runner a slot's inputs (`put`: on a GPU written in place by the judge), copies a value a runner
returned into the judge's memory (`decode`) and reads what the runner reports of its own process (`advisories`).
"""
from __future__ import annotations

import time
from typing import Callable

import torch

from kernelsearch.judge import wire
from kernelsearch.judge.client import RunnerClient, RunnerLost, RunnerTimedOut
from kernelsearch.judge.memory import JudgeMemory, is_out_of_memory, tensor_bytes
from kernelsearch.judge.problem import DTYPES, Case, Problem
from kernelsearch.judge.seeds import derive_seed
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.judge.status import CandidateFailure, Status

PUT_RETRIES, PUT_RETRY_S = 2, 1.0   # a candidate's out-of-memory reply to receiving inputs: asked again 1 s, 2 s on


class Conversation:
    """The judge's side of an evaluation's runners: the candidate's (`cand`, once started) and the references'.

    `mode` is "cuda" or "cpu"; `mem` is the judge's memory bookkeeping, which sizes what the judge asks for and names
    an out-of-memory failure of it; `spawn(role)` starts a runner and returns its client."""

    def __init__(self, problem: Problem, settings: EvalSettings, *, mode: str, spawn: Callable[[str], RunnerClient],
                 mem: JudgeMemory):
        self.problem, self.settings, self.mode, self.spawn, self.mem = problem, settings, mode, spawn, mem
        self.device = "cuda" if mode == "cuda" else "cpu"
        self.cand: RunnerClient | None = None

    def runner(self, role: str) -> RunnerClient:
        """A new runner for `role` ("candidate" or "reference"), set up for the mode (an IPC reader on a GPU)."""
        r = self.spawn(role)
        if self.mode == "cuda":
            r.ipc = wire.IpcReader()
        self.ask(r, {"op": "setup", "mode": self.mode, "threads": 1,
                     "gpu_memory_fraction": self.settings.gpu_memory_fraction}, "setting up", "compile")
        return r

    def ask(self, r: RunnerClient, header: dict, what: str, stage: str, buffers: list | None = None):
        """The runner's reply to `header` and its buffers; a lost runner, a malformed reply or an error reply raises
        `CandidateFailure` (`what` names the request in its reason, `stage` the stage)."""
        try:
            reply, bufs = r.request(header, buffers)
        except RunnerTimedOut as err:
            raise CandidateFailure(Status.timeout, f"{what}: {err}", stage=stage) from None
        except RunnerLost as err:
            raise CandidateFailure(Status.crash, f"{what}: {err}", stage=stage) from None
        except wire.WireError as err:
            raise CandidateFailure(Status.crash, f"{what}: malformed reply from the {r.name}'s process: {err}",
                                   stage=stage) from None
        if "error" in reply:
            # a reference runner (which never loads candidate code) out of memory is the harness's failure. The
            # candidate's reply is the candidate's word, whatever it says: "out of memory" there was filed as the
            # judge's own failure (uncharged, queued again) until a candidate forged it (fixture round3/forged_oom)
            if r.name != "candidate":   # a reference's (a re-timing group has several candidates)
                self.mem.raise_if_out_of_memory(reply["error"], f"the {r.name}'s process {what}", stage)
            raise failure_from(reply, what, stage)
        return reply, bufs

    def decode(self, r: RunnerClient, obj, bufs, what: str, stage: str, limit: int | None = None):
        """A value from a runner, copied into the judge's own memory at once. Outputs larger than `limit` bytes
        are refused before the copy (the judge's memory is planned for the reference's outputs)."""
        try:
            value = wire.decode(obj, bufs, self.device, r.ipc)
        except wire.WireError as err:
            raise CandidateFailure(Status.crash, f"{what}: malformed output from the candidate's process: {err}",
                                   stage=stage) from None
        if limit is not None and tensor_bytes([value]) > limit:
            raise CandidateFailure(Status.incorrect, f"{what} returned {tensor_bytes([value]) / 2**20:,.1f} MiB of "
                                   f"outputs; the reference returns {self.mem.out_bytes / 2**20:,.1f} MiB", stage=stage)
        return own(value)

    def build(self, case: Case, seed: int, stage: str, runners: list[tuple[RunnerClient, str]], *,
              warm_slot: int | None = None) -> torch.nn.Module:
        """The reference model here (trusted), built once, and each runner's model (`name` eager, or compile for
        torch.compile's) with the same init and the same weights. `warm_slot`: for the warm-up (judge/runner.py
        `warm`), whose runner keeps the model for that slot; the reference here stays on the host (unused)."""
        init = self.problem.build_init_inputs(case)
        init_seed = derive_seed(seed, "init")
        torch.manual_seed(init_seed)
        ref = self.problem.module.Model(*init)
        state = ref.state_dict() if isinstance(ref, torch.nn.Module) else {}
        dtype = case.dtype if self.problem.builtin and case.dtype in DTYPES else None
        if warm_slot is None:
            ref = ref.to(self.device)
            if dtype:
                ref = ref.to(DTYPES[dtype])
        bufs: list = []
        header = {"op": "build", "init": wire.encode(list(init), bufs), "dtype": dtype, "seed": init_seed,
                  "state": {k: wire.encode(v, bufs) for k, v in state.items()},
                  **({"warm_slot": int(warm_slot)} if warm_slot is not None else {})}
        for r, name in runners:
            self.ask(r, {**header, "name": name}, "ModelNew(...)", stage, bufs)
        return ref

    def put(self, r: RunnerClient, slot: int, inputs: list, stage: str) -> list | None:
        """Give the runner its inputs for `slot`. GPU: the runner allocates, the judge writes in place and
        returns the views it can read back (the input check)."""
        bufs: list = []
        reply = self._receive(r, {"op": "inputs", "slot": slot, "values": self._values(inputs, bufs)}, stage, bufs)
        if self.mode != "cuda":
            return None
        views = self._write(r, inputs, reply.get("descs"), stage)
        torch.cuda.synchronize()
        return views

    def put_many(self, r: RunnerClient, sets: list[list], stage: str) -> list[list | None]:
        """`put` of sets[k] into slot k for every k, in one round trip to the runner (the timing stage's n slots a
        side: n requests, each its allocation, reply and synchronize, were n x 1-2 ms of a stage that holds the
        device's one timing slot)."""
        bufs: list = []
        header = {"op": "inputs", "sets": [{"slot": k, "values": self._values(x, bufs)} for k, x in enumerate(sets)]}
        reply = self._receive(r, header, stage, bufs)
        if self.mode != "cuda":
            return [None] * len(sets)
        descs = reply.get("sets")
        if not isinstance(descs, list) or len(descs) != len(sets):
            raise CandidateFailure(Status.crash, f"receiving inputs: {len(sets)} slots asked, the reply describes "
                                   f"{len(descs) if isinstance(descs, list) else 'no'} slots", stage=stage)
        views = [self._write(r, x, d, stage) for x, d in zip(sets, descs)]
        torch.cuda.synchronize()
        return views

    def _values(self, inputs: list, bufs: list) -> list:
        if self.mode == "cuda":   # the runner allocates each tensor, the judge writes it (`_write`)
            return [{"alloc": {"dtype": wire.DTYPE_NAMES[v.dtype], "shape": list(v.shape)}}
                    if isinstance(v, torch.Tensor) else wire.encode(v, bufs) for v in inputs]
        return [wire.encode(v, bufs) for v in inputs]

    def _write(self, r: RunnerClient, inputs: list, descs, stage: str) -> list:
        """The inputs written in place into the runner's allocations `descs` describe; their views."""
        views = []
        try:
            if not isinstance(descs, list) or len(descs) != len(inputs):
                raise wire.WireError("a reply that does not describe every input")
            for v, d in zip(inputs, descs):
                if isinstance(v, torch.Tensor):
                    view = r.ipc.tensor((d or {}).get("ipc"))
                    if view.shape != v.shape or view.dtype != v.dtype or not view.is_contiguous():
                        raise wire.WireError("an input buffer of the wrong shape")
                    view.copy_(v)
                    views.append(view)
                else:
                    views.append(v)
        except wire.WireError as err:
            raise CandidateFailure(Status.crash, f"receiving inputs: {err}", stage=stage) from None
        return views

    def _receive(self, r: RunnerClient, header: dict, stage: str, bufs: list) -> dict:
        """The runner's reply to being handed inputs. An out-of-memory reply of the candidate's to this allocation,
        which the judge sized, is asked again after a wait, up to PUT_RETRIES times, before it is the candidate's
        crash: beside other evaluations the device can be full for a moment (KernelBench on an H100: two honest
        kernels ended `crash`, out of memory receiving their inputs). The reply is the candidate's word, so the last
        one still decides: a candidate that says it every time is a crash as before, a few seconds later."""
        for attempt in range(PUT_RETRIES):
            try:
                return self.ask(r, header, "receiving inputs", stage, bufs)[0]
            except CandidateFailure as f:
                if r.name != "candidate" or not is_out_of_memory(f.reason or ""):
                    raise
                self.mem.note(f"{stage}: the candidate's process was out of memory receiving its inputs; asked "
                              f"again after {PUT_RETRY_S * (attempt + 1):g} s")
                self.mem.free()   # the judge's own cached blocks back to the device
                time.sleep(PUT_RETRY_S * (attempt + 1))
        return self.ask(r, header, "receiving inputs", stage, bufs)[0]   # the last reply decides

    @staticmethod
    def advisories(reply: dict, when: str, stage: str) -> None:
        """What the runner reports of its own process: advisory, it catches honest mistakes and naive cheats."""
        if reply.get("guard"):
            names = ", ".join(str(x) for x in reply["guard"][:10])
            raise CandidateFailure(Status.rejected, f"identity check: the candidate replaced {names} ({when})",
                                   stage=stage)
        if reply.get("tf32"):
            raise CandidateFailure(Status.rejected, f"the candidate changed the TF32/matmul precision settings "
                                   f"({when})", stage=stage)
        if isinstance(reply.get("threads"), int) and reply["threads"] > 0:
            raise CandidateFailure(Status.rejected, f"thread check: {reply['threads']} thread(s) still running after "
                                   f"{when} returned; all work must finish inside the call", stage=stage)

    def close(self) -> None:
        """Close the candidate's runner, where it was started (the references' are closed by their users)."""
        if self.cand is not None:
            self.cand.close()


def failure_from(reply: dict, what: str, stage: str) -> CandidateFailure:
    """The candidate's failure that a runner's error reply describes: compile_error, rejected or crash."""
    err = reply.get("error")
    if not isinstance(err, dict):
        return CandidateFailure(Status.crash, f"{what}: malformed reply from the candidate's process", stage=stage)
    name, text, tb = (str(err.get(k, ""))[:4000] for k in ("type", "text", "tb"))
    first = text.strip().splitlines()[0][:300] if text.strip() else ""
    where = str(err.get("stage", ""))
    fallback = Status.compile_error if "Compil" in name or "compil" in text[:200] else Status.crash
    status = {"compile": Status.compile_error, "static": Status.rejected}.get(where, fallback)
    return CandidateFailure(status, f"{what} raised {name}: {first}" if name else f"{what}: {first}",
                            tb or None, stage=stage)


def own(value):
    """Copy a decoded value into the judge's own memory (an IPC view must not outlive the runner's thaw)."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list):
        return [own(v) for v in value]
    if isinstance(value, tuple):
        return tuple(own(v) for v in value)
    return value   # scalars, strings, dtypes: immutable

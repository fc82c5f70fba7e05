"""The two roles of the search: the idea writer and the coder.

Each renders its prompt from prompts/ and its typed task (agent/base.py: the controller builds an `IdeaTask` for
the idea writer, a `CodeTask` for the coder), calls its provider with both, parses the reply by the contract, and
records the call (tokens, cost, latency, attempts, status, error) through `record`, a callback given by the
controller.
A reply that breaks the contract is recorded with its status and does not stop the run; the coder is asked
once more with the error.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from importlib import resources
from string import Template
from typing import Any, Callable, Mapping, Sequence

from kernelsearch.agent.base import ChatRequest, CodeTask, IdeaTask, Message, Provider, Task
from kernelsearch.agent.cost import call_cost
from kernelsearch.agent.errors import AuthError, ProviderError, ReplyError
from kernelsearch.agent.parsing import extract_code, parse_ideas
from kernelsearch.agent.settings import LLMConfig, Price

Recorder = Callable[[dict], int]


def prompt(name: str) -> Template:
    return Template(resources.files("kernelsearch.prompts").joinpath(f"{name}.md").read_text())


@dataclass
class SeedView:
    kernel_id: int
    code: str
    result: str            # "0.91 ms, 1.8x eager, 74% of roofline (memory-bound)" or the failure


@dataclass
class IdeaOut:
    title: str
    description: str
    seed_kernel_id: int | None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class FailedKernel:
    """A kernel that was not correct, as the coder is shown it."""

    kernel_id: int
    code: str
    status: str
    reason: str
    error_text: str = ""     # the longer text (traceback, mismatches), already cut to a prompt's size


@dataclass
class CodeOut:
    code: str | None
    llm_call_id: int | None
    error: str | None = None


def _extras(text: str) -> list[dict]:
    """The idea objects as JSON, with any fields beyond title and description (a seed id, parameters)."""
    from kernelsearch.agent.parsing import _load_json

    try:
        data = _load_json(text)
    except ValueError:
        return []
    items = data.get("ideas") if isinstance(data, dict) else data
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


LANGUAGES = ("triton", "cuda", "any")   # search.language


def language_text(language: str) -> str:
    """What the system prompt says the kernels are written in: prompts/language_<language>.md, with the CUDA
    contract (prompts/cuda_contract.md, stated once) where CUDA C++ may be written."""
    if language not in LANGUAGES:
        raise ValueError(f"search.language: {language!r} is not one of {', '.join(LANGUAGES)}")
    contract = prompt("cuda_contract").template.rstrip()
    return prompt(f"language_{language}").substitute(contract=contract).rstrip()


def device_text(mode: str, ceilings: Mapping[str, Any] | None = None) -> str:
    """The device the system prompt names: on a GPU, from the ceilings the run's evaluations measured (judge/
    roofline.py: copy bandwidth, dense matmul rates), never a datasheet's; before any is measured, the GPU with no
    figures; on a machine without one, what the kernels are checked for and how."""
    if mode != "cuda":
        return ("a Hopper GPU (sm_90: H100 or H200). This run's machine has no GPU: Triton kernels are run by "
                "Triton's interpreter and compiled for sm_90, CUDA C++ is compiled for sm_90a with nvcc and not run, "
                "and times are the interpreter's, not a GPU's")
    c = dict(ceilings or {})
    name = c.get("device") or "the run's NVIDIA GPU"
    figures = []
    if c.get("copy_gbps"):
        figures.append(f"{c['copy_gbps'] / 1000:.2f} TB/s copy bandwidth")
    for key, what in (("bfloat16_tflops", "bf16"), ("float32_tflops", "fp32")):
        if c.get(key):
            figures.append(f"{c[key]:.0f} TFLOP/s dense {what} matmul")
    if not figures:
        return f"{name} (its ceilings are measured at the run's first evaluation)"
    return f"{name} (measured on it: {', '.join(figures)})"


class _Role:
    role = ""

    def __init__(self, provider: Provider, cfg: LLMConfig, prices: Mapping[str, Price], record: Recorder,
                 allow_torch: Sequence[str] = (), language: str = "triton",
                 device: Callable[[], str] = lambda: device_text("cpu")):
        self.provider, self.cfg, self.prices, self.record = provider, cfg, prices, record
        self.allow_torch = tuple(allow_torch)   # evaluation.allow_torch: said in the contract of the system prompt
        self.language = language_text(language)   # search.language: what the kernels are written in
        self.device = device   # the device the system prompt names, asked at each call (ceilings come in as measured)

    def _system(self) -> Message:
        allowance = "" if not self.allow_torch else prompt("allow_torch").substitute(ops=", ".join(self.allow_torch))
        return Message("system", prompt("system").substitute(allowance=allowance, language=self.language,
                                                             device=self.device()))

    async def _call(self, messages: list[Message], task: Task) -> tuple[Any, dict, str | None]:
        """One provider call. Returns (reply or None, the call's row to record, error)."""
        req = ChatRequest(messages=messages, role=self.role, max_tokens=self.cfg.max_tokens,
                          temperature=self.cfg.temperature, task=task)
        t0 = time.monotonic()
        row = {"role": self.role, "provider": self.provider.name, "model": self.cfg.model or self.provider.name}
        try:
            reply = await self.provider.complete(req)
        except ProviderError as err:
            row.update(status="error", error=str(err), attempts=err.attempts, latency_s=time.monotonic() - t0)
            if isinstance(err, AuthError):   # a bad key fails every call: record it and stop the run
                self.record(row)
                raise
            return None, row, str(err)
        row.update(model=reply.model, tokens_in=reply.tokens_in, tokens_out=reply.tokens_out,
                   cost_usd=call_cost(self.prices, reply.model, reply.tokens_in, reply.tokens_out),
                   latency_s=time.monotonic() - t0, attempts=reply.attempts, reply_text=reply.text)
        return reply, row, None


class IdeaWriter(_Role):
    role = "ideas"

    async def propose(self, *, problem: str, reference: str, timed_case: str, device: str, seeds: list[SeedView],
                      tried: list[str], task: IdeaTask) -> tuple[list[IdeaOut], int | None, str | None]:
        """`task.n` ideas about `seeds` (the same kernels as `task.seeds`, with their measured results)."""
        n = task.n
        seeds_text = "\n\n".join(f"### Kernel {s.kernel_id}: {s.result}\n\n```python\n{s.code}\n```" for s in seeds)
        msgs = [self._system(),
                Message("user", prompt("ideas").substitute(
                    problem=problem, reference=reference, timed_case=timed_case, device=device, seeds=seeds_text,
                    tried="\n".join(f"- {t}" for t in tried) or "(none yet)", n=n))]
        reply, row, err = await self._call(msgs, task)
        if reply is None:
            return [], self.record(row), err
        try:
            drafts = parse_ideas(reply.text, finish_reason=reply.finish_reason, min_ideas=1, max_ideas=n)
        except ReplyError as e:
            row.update(status=e.kind, error=str(e))
            return [], self.record(row), str(e)
        call_id = self.record({**row, "status": "ok"})
        extras = {str(x.get("title", "")).strip().lower(): x for x in _extras(reply.text)}
        valid_seeds = {s.kernel_id for s in seeds}
        out = []
        for i, d in enumerate(drafts):
            x = extras.get(d.title.strip().lower(), {})
            seed = x.get("seed")
            if seed not in valid_seeds:
                seed = seeds[i % len(seeds)].kernel_id if seeds else None
            meta = {k: v for k, v in x.items() if k not in ("title", "description", "seed")}
            out.append(IdeaOut(d.title, d.description, seed, meta))
        return out, call_id, None


class Coder(_Role):
    role = "code"

    async def write(self, *, problem: str, reference: str, timed_case: str, seed_id: int | None, seed_result: str,
                    sibling_errors: list[str], task: CodeTask) -> CodeOut:
        """Branch `task.branch` of `task.idea` on the seed (`task.seed_code`, measured as `seed_result`)."""
        errs = ""
        if sibling_errors:
            errs = "\nSibling branches of this idea failed; avoid their mistakes:\n" + "\n".join(
                f"- {e}" for e in sibling_errors[-3:]) + "\n"
        msgs = [self._system(),
                Message("user", prompt("code").substitute(
                    problem=problem, reference=reference, timed_case=timed_case, seed_id=seed_id,
                    seed_result=seed_result, seed_code=task.seed_code, idea_title=task.idea.title,
                    idea_description=task.idea.description, branch=task.branch, branches=task.branches,
                    sibling_errors=errs))]
        return await self._ask(msgs, task)

    async def write_first(self, *, problem: str, reference: str, timed_case: str, failures: list[FailedKernel],
                          task: CodeTask) -> CodeOut:
        """A first kernel written from the reference alone (a problem with no starter; `task.seed_code` is empty).
        `failures` are the run's earlier first kernels that were not correct, each with its code and what went
        wrong."""
        text = ""
        if failures:
            text = prompt("first_failed").substitute(kernels="".join(
                f"\n### Kernel {f.kernel_id}: {f.status}: {f.reason}\n\n"
                + (f"```text\n{f.error_text}\n```\n\n" if f.error_text else "")
                + f"```python\n{f.code}\n```\n" for f in failures))
        msgs = [self._system(),
                Message("user", prompt("first").substitute(
                    problem=problem, reference=reference, timed_case=timed_case, branch=task.branch,
                    branches=task.branches, failures=text))]
        return await self._ask(msgs, task)

    async def _ask(self, msgs: list[Message], task: CodeTask) -> CodeOut:
        last_err, call_id = None, None
        for attempt in range(2):   # one more ask, with the error, when the reply breaks the contract
            reply, row, err = await self._call(msgs, task)
            if reply is None:
                return CodeOut(None, self.record(row), err)
            try:
                code = extract_code(reply.text, finish_reason=reply.finish_reason)
            except ReplyError as e:
                last_err = str(e)
                row.update(status=e.kind, error=last_err)
                call_id = self.record(row)
                msgs = msgs + [Message("assistant", reply.text), Message("user", prompt("retry").substitute(
                    error=last_err, what="the complete kernel file in one ```python fenced block."))]
                continue
            return CodeOut(code, self.record({**row, "status": "ok"}))
        return CodeOut(None, call_id, last_err)

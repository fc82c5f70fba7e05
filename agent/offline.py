"""The offline provider: a rule-based proposer that needs no network, the embedded default.

It answers through the same text contract as an LLM (ideas as JSON, code in a ```python block), so the
parsing and recording paths are the ones a real provider uses. It reads the typed task (`ChatRequest.task`, an
`IdeaTask` or a `CodeTask`, agent/base.py) instead of the prose: the family's search space (families/<name>/space.py)
gives the ideas (moves with their text) and the code (the template rendered at the idea's parameters). A problem
that is not a family (a KernelBench file) is searched in the space its traced reference matches
(generators/match.py), or refused in one line naming the ops found.
Deterministic for a given config seed, so a resumed run makes the choices it would have made.

What it reads from the task, besides the prompt's own (problem, seeds, idea, branch): `seen_codes`, every
kernel the run has written (an idea is not proposed again), `earlier_codes`, the kernels of earlier rounds (a
branch is not written again), and each seed's `tried`, the (title, text) of the ideas its lineage has tried (the
controller drops such an idea, so proposing it would waste the round). An idea's text names the seed's variant
(`_in_context`): one move renders a different kernel on each variant, and is not closed on a seed by its trial on
an ancestor of another variant. The codes are code, as any provider could be given; what they mean in the family's
search space is worked out here.

No idea and no branch lands on a point the space's feasibility model refuses at some shape case of the problem
(families/space.py: registers, shared memory, a launcher's refusal on an H200).
"""
from __future__ import annotations

import json
import random

from kernelsearch.agent.base import ChatReply, ChatRequest, CodeTask, IdeaTask
from kernelsearch.agent.errors import ProviderError
from kernelsearch.families import load_problem
from kernelsearch.families.space import HEADER
from kernelsearch.generators.match import Unmatched, match_problem


def _idea_key(title: str, text: str) -> str:
    """Two ideas are the same idea when their title and text are, case and spacing aside (as the controller
    compares them: search/strategies.py idea_key)."""
    return " ".join(f"{title}\n{text}".split()).lower()


def _in_context(description: str, params: dict) -> str:
    """A move's text as an idea on a seed at `params`: in a space of several variants it names the seed's variant,
    since one move renders a different kernel on each (three_pass at 4 warps vs pipelined at 32, for softmax's
    "BLOCK 2048 with 8 warps"). The controller drops an idea whose title and text the seed's lineage has tried;
    named so, a move tried on an ancestor of another variant stays open here (the run's kernels are still never
    written twice: `seen`)."""
    variant = params.get("variant")
    return description if variant is None else f"{description} (on the {variant} kernel)"


def _is_cuda(code: str) -> bool:
    return "load_inline" in code


def _approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class OfflineProvider:
    name = "offline"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._matched: dict[str, tuple] = {}

    def _space(self, problem_ref, cuda: bool = False):
        """The search space and the problem's shape cases: every point proposed is feasible at each. A family's own
        space; for a problem that is not a family, the one its reference's graph matches (generators/match.py: the
        generated pointwise family, or a family's template around the problem's ModelNew), found once per problem.
        `cuda`: the family's CUDA C++ space (space_cuda.py), which only the row families have."""
        key = json.dumps(problem_ref, sort_keys=True) + ("|cuda" if cuda else "")
        if key not in self._matched:
            problem = load_problem(problem_ref)
            if cuda:
                space = getattr(problem.family, "CUDA_SPACE", None)
                if space is None:
                    raise ProviderError(f"offline provider: problem {problem.name!r} has no CUDA C++ search space "
                                        "(the row families have one: softmax, rmsnorm, layernorm, reduce)")
                self._matched[key] = (space, problem.cases)
                return self._matched[key]
            try:
                self._matched[key] = (match_problem(problem).space, problem.cases)
            except Unmatched as err:
                raise ProviderError(str(err)) from None
        return self._matched[key]

    def _space_of(self, problem_ref, code: str, language: str):
        """The space a kernel is searched in: its own language's (CUDA C++ where it builds with load_inline); for a
        first kernel (no code), search.language's (`any` starts in Triton)."""
        return self._space(problem_ref, cuda=_is_cuda(code) if code else language == "cuda")

    async def complete(self, request: ChatRequest) -> ChatReply:
        task = request.task
        prompt_tokens = sum(_approx_tokens(m.content) for m in request.messages)
        if request.role not in ("ideas", "code"):
            raise ProviderError(f"offline provider: unknown role {request.role!r}")
        # it answers from the task alone, never the prose: a request without its role's task cannot be answered
        if request.role == "ideas" and isinstance(task, IdeaTask):
            text = self._ideas(task)
        elif request.role == "code" and isinstance(task, CodeTask):
            text = self._code(task)
        else:
            raise ProviderError(f"offline provider: a {request.role!r} request needs its task "
                                f"({'IdeaTask' if request.role == 'ideas' else 'CodeTask'}), got {type(task).__name__}")
        return ChatReply(text=text, model="offline-rules", tokens_in=prompt_tokens, tokens_out=_approx_tokens(text))

    # -- ideas ------------------------------------------------------------------------------------------------
    def _ideas(self, task: IdeaTask) -> str:
        rng = random.Random(f"{self.seed}/ideas/{task.round}")
        # kernels are compared by what they render to, so a move that only sets a knob the seed's variant ignores
        # is not proposed as if it were new; the run's kernels are read back into the space's parameters here (each
        # language's kernels into its own space: a seed is searched in the language it is written in)
        seen_in: dict[bool, set] = {}
        per_seed: list[list[dict]] = []
        for seed in task.seeds:
            space, cases = self._space_of(task.problem, seed.code, task.language)
            lang = _is_cuda(seed.code)
            if lang not in seen_in:
                seen_in[lang] = {space.body(space.params_of(c)) for c in task.seen_codes if _is_cuda(c) == lang}
            seen = seen_in[lang]
            params = space.params_of(seed.code)
            seen.add(space.body(params))
            tried = {_idea_key(t, d) for t, d in seed.tried}
            options = []
            for move, new in space.applicable(params, cases):
                key = space.body(new)
                text = _in_context(move.description, params)
                if key in seen or _idea_key(move.title, text) in tried:
                    continue
                options.append({"title": move.title, "description": text, "seed": seed.kernel_id,
                                "params": new, "fixed": sorted(move.changes), "_key": key})
            # structural moves (those that change the variant) are tried before tuning ones
            rng.shuffle(options)
            options.sort(key=lambda o: 0 if "variant" in o["fixed"] else 1)
            per_seed.append(options)
        ideas, used, kinds = [], set(), set()
        n = task.n
        while len(ideas) < n and any(per_seed):
            for options in per_seed:   # round-robin over the seeds: the best seed first, but not only it
                fresh = [o for o in options if o["_key"] not in used]
                # one idea per kind of move (the parameters it sets) before a second of the same kind
                pick = next((o for o in fresh if tuple(o["fixed"]) not in kinds), fresh[0] if fresh else None)
                options[:] = [o for o in fresh if o is not pick]
                if pick is not None:
                    used.add(pick["_key"])
                    kinds.add(tuple(pick["fixed"]))
                    ideas.append({k: v for k, v in pick.items() if k != "_key"})
                if len(ideas) >= n:
                    break
        return "```json\n" + json.dumps({"ideas": ideas}, indent=1) + "\n```\n"

    # -- code -------------------------------------------------------------------------------------------------
    def _code(self, task: CodeTask) -> str:
        space, cases = self._space_of(task.problem, task.seed_code, task.language)
        cuda = _is_cuda(task.seed_code) if task.seed_code else task.language == "cuda"
        idea = task.idea
        meta = idea.meta or {}
        base = space.params_of(task.seed_code or "")
        params = meta.get("params")
        fixed = set(meta.get("fixed") or [])
        if meta.get("first_kernel"):   # first kernels with no starter: the space's default at the timed shape
            timed = next((c for c in cases if c.timed), None)
            params, fixed = (space.default_for(timed, cases) if timed else dict(space.default)), set()
        elif params is None:   # an idea written elsewhere: match a move by its title, else a random applicable one
            rng = random.Random(f"{self.seed}/match/{idea.title}")
            options = space.applicable(base, cases)
            match = [(m, p) for m, p in options if m.title.lower() in f"{idea.title} {idea.description}".lower()]
            if not (match or options):
                raise ProviderError("offline provider: no move applies to this seed")
            move, params = (match or [rng.choice(options)])[0]
            fixed = set(move.changes)
        why = space.infeasible(params, cases)
        if why:   # an idea from elsewhere (another provider, a replay) at a point the H200 cannot run
            raise ProviderError(f"offline provider: the idea's parameters cannot run on an H200 at {why}")
        rng = random.Random(f"{self.seed}/code/{idea.id}/{json.dumps(params, sort_keys=True)}")
        earlier = {space.body(space.params_of(c)) for c in task.earlier_codes if HEADER in c and _is_cuda(c) == cuda}
        variants = space.branches(params, task.branches, rng, fixed, avoid=earlier, cases=cases)
        chosen = variants[task.branch % len(variants)]
        code = space.render(chosen)
        head = f"Branch {task.branch} of \"{idea.title}\": parameters {json.dumps(chosen)}."
        return f"{head}\n\n```python\n{code}```\n"

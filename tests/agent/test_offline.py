"""The offline provider: real ideas from the family's search space, distinct, and code that renders them, read from
the request's typed task (agent/base.py), never its prose."""
from __future__ import annotations

import asyncio
import json

import pytest

from kernelsearch.agent.base import ChatRequest, CodeTask, IdeaBrief, IdeaTask, Message, SeedTask
from kernelsearch.agent.errors import ProviderError
from kernelsearch.agent.offline import OfflineProvider
from kernelsearch.agent.parsing import extract_code, parse_ideas
from kernelsearch.families.softmax import SPACE, STARTER

SOFTMAX = {"builtin": "softmax"}


def _ask(role, task):
    req = ChatRequest(messages=[Message("user", "x")], role=role, task=task)
    return asyncio.run(OfflineProvider(seed=3).complete(req))


def _ideas(n, seeds, seen_codes=()):
    """The ideas (raw JSON objects) the provider proposes in round 1 about `seeds`."""
    task = IdeaTask(problem=SOFTMAX, round=1, n=n, seeds=tuple(seeds), seen_codes=tuple(seen_codes))
    return json.loads(_ask("ideas", task).text.split("```json\n")[1].split("```")[0])["ideas"]


def test_ideas_are_distinct_and_of_different_kinds():
    task = IdeaTask(problem=SOFTMAX, round=1, n=4, seeds=(SeedTask(1, STARTER),))
    reply = _ask("ideas", task)
    ideas = parse_ideas(reply.text, min_ideas=4)
    raw = json.loads(reply.text.split("```json\n")[1].split("```")[0])["ideas"]
    assert len({i.title for i in ideas}) == 4
    assert len({tuple(i["fixed"]) for i in raw}) == 4          # four different kinds of move
    assert all(i["params"] != SPACE.default for i in raw)      # each one changes the starter


def test_ideas_skip_what_was_already_tried():
    seeds = [SeedTask(1, STARTER)]
    tried = [i["params"] for i in _ideas(50, seeds)[:5]]
    seen = [SPACE.render(p) for p in tried]   # the run's kernels, as the controller gives them
    assert not any(i["params"] in tried for i in _ideas(50, seeds, seen_codes=seen))


def test_code_renders_the_idea_and_branches_differ():
    idea = IdeaBrief(7, "BLOCK 4096 with 16 warps", "d",
                     {"params": {**SPACE.default, "BLOCK": 4096, "num_warps": 16}, "fixed": ["BLOCK", "num_warps"]})
    codes = [extract_code(_ask("code", CodeTask(SOFTMAX, idea, branch=b, branches=3, seed_code=STARTER)).text)
             for b in range(3)]
    assert len(set(codes)) == 3
    params = [SPACE.params_of(c) for c in codes]
    assert params[0]["BLOCK"] == 4096 and params[0]["num_warps"] == 16
    assert all(p["BLOCK"] == 4096 and p["num_warps"] == 16 for p in params)   # the idea's own knobs stay fixed


def test_branches_are_distinct_kernels_not_just_distinct_parameters():
    # the single-pass kernel ignores SPLIT, programs_per_sm and num_stages: varying them alone renders the same
    # kernel, which a search would time twice
    coop = {**SPACE.default, "variant": "coop"}
    ignored = {**SPACE.default, "SPLIT": 8 if SPACE.default["SPLIT"] != 8 else 2}
    assert SPACE.body(ignored) == SPACE.body(SPACE.default) and SPACE.body(coop) != SPACE.body(SPACE.default)
    import random
    for seed in range(20):
        got = SPACE.branches(SPACE.default, 4, random.Random(seed), fixed={"variant"})
        bodies = [SPACE.body(p) for p in got]
        assert len(set(bodies)) == len(bodies) >= 2
    # kernels of earlier rounds are not written again
    first = SPACE.branches(SPACE.default, 4, random.Random(0), fixed={"variant"})
    again = SPACE.branches(SPACE.default, 4, random.Random(0), fixed={"variant"},
                           avoid={SPACE.body(p) for p in first[1:]})
    assert not {SPACE.body(p) for p in again[1:]} & {SPACE.body(p) for p in first[1:]}


def test_ideas_do_not_propose_a_move_that_renders_the_seed_again():
    raw = _ideas(50, [SeedTask(1, STARTER)])
    bodies = [SPACE.body(i["params"]) for i in raw]
    assert SPACE.body(SPACE.params_of(STARTER)) not in bodies
    assert len(set(bodies)) == len(bodies)


def test_branches_stay_inside_shared_memory():
    # the tuning knobs of a branch (stages, key block) can push attention past the H200's 227 KB of shared memory:
    # an H200 search crashed on 64 x 128 tiles at 4 stages (OutOfResources); such branches are not made
    import random

    from kernelsearch.families.flash_attention.space import SHARED_MAX, shared_bytes
    from kernelsearch.families.flash_attention_causal import SPACE as ATTN

    idea = {**ATTN.default, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 2}
    assert shared_bytes({**idea, "num_stages": 4}) > SHARED_MAX        # a point the tuning knobs can reach
    for seed in range(30):
        for p in ATTN.branches(idea, 4, random.Random(seed), fixed={"BLOCK_M", "num_warps"}):
            assert shared_bytes(p) <= SHARED_MAX, p


def test_softmax_crfm_offers_no_move_that_packs_its_wide_rows():
    from kernelsearch.families.softmax_crfm import SPACE as CRFM

    assert any(m.changes.get("ROWS", 1) > 1 for m in SPACE.moves)          # softmax (32000-wide bf16) has them
    for params in (CRFM.default, {**CRFM.default, "variant": "single"}):
        assert all(new["ROWS"] == 1 for _, new in CRFM.applicable(params))


def test_a_move_tried_on_an_ancestor_of_another_variant_is_proposed_again():
    # the lineage rule drops an idea whose title and text an ancestor tried; one move renders a different kernel on
    # each variant (softmax's "BLOCK 2048 with 8 warps": three_pass at 8 warps, or the pipelined row at 8 warps),
    # so its text names the seed's variant and a move tried on a three_pass ancestor stays open on a pipelined seed.
    # Before: on an H200 bench the best kernel's moves were all "tried" on its three_pass root and it was spent
    plain = SPACE.render({**SPACE.default, "variant": "three_pass", "num_warps": 4, "BLOCK": 1024})
    on_plain = _ideas(80, [SeedTask(1, plain)])
    tried = tuple((i["title"], i["description"]) for i in on_plain)
    assert "BLOCK 2048 with 8 warps" in [t for t, _ in tried]
    seed = SeedTask(2, STARTER, tried)   # the pipelined starter, under that root
    again = _ideas(80, [seed], seen_codes=[plain])
    # the pipelined row at 8 warps (a kernel no one has written), by one of the BLOCK moves its root tried (the
    # pipelined row sizes its block to the row: the six BLOCK values are one kernel, proposed once)
    eight = [i for i in again if i["title"].endswith("with 8 warps") and i["params"]["num_warps"] == 8]
    assert len(eight) == 1 and eight[0]["title"] in {t for t, _ in tried}
    assert eight[0]["params"]["variant"] == "pipelined" and "(on the pipelined kernel)" in eight[0]["description"]
    # tried on a seed of its own variant (and written: the run's kernels), it is not proposed again
    mine = tuple((i["title"], i["description"]) for i in again)
    written = [plain] + [SPACE.render(i["params"]) for i in again]
    assert _ideas(80, [SeedTask(2, STARTER, tried + mine)], seen_codes=written) == []


def test_a_request_without_its_roles_task_is_refused_in_one_line():
    # the provider answers from the task alone: an ideas request carrying a code task (or none) cannot be answered
    code = CodeTask(SOFTMAX, IdeaBrief(None, "t", "d"), branch=0, branches=1)
    for role, task in (("ideas", code), ("ideas", None), ("code", None)):
        with pytest.raises(ProviderError, match=f"a '{role}' request needs its task"):
            _ask(role, task)

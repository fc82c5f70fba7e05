"""The offline provider: real ideas from the family's search space, distinct, and code that renders them."""
from __future__ import annotations

import asyncio
import json

from kernelsearch.agent.base import ChatRequest, Message
from kernelsearch.agent.offline import OfflineProvider
from kernelsearch.agent.parsing import extract_code, parse_ideas
from kernelsearch.families.softmax import SPACE, STARTER


def _ask(role, hints):
    req = ChatRequest(messages=[Message("user", "x")], role=role, hints=hints)
    return asyncio.run(OfflineProvider(seed=3).complete(req))


def test_ideas_are_distinct_and_of_different_kinds():
    hints = {"problem": {"builtin": "softmax"}, "n": 4, "round": 1, "seen_codes": [],
             "seeds": [{"kernel_id": 1, "code": STARTER}]}
    reply = _ask("ideas", hints)
    ideas = parse_ideas(reply.text, min_ideas=4)
    raw = json.loads(reply.text.split("```json\n")[1].split("```")[0])["ideas"]
    assert len({i.title for i in ideas}) == 4
    assert len({tuple(i["fixed"]) for i in raw}) == 4          # four different kinds of move
    assert all(i["params"] != SPACE.default for i in raw)      # each one changes the starter


def test_ideas_skip_what_was_already_tried():
    hints = {"problem": {"builtin": "softmax"}, "n": 50, "round": 1, "seeds": [{"kernel_id": 1, "code": STARTER}]}
    everything = json.loads(_ask("ideas", {**hints, "seen_codes": []}).text.split("```json\n")[1].split("```")[0])
    tried = [i["params"] for i in everything["ideas"][:5]]
    seen = [SPACE.render(p) for p in tried]   # the run's kernels, as the controller gives them
    rest = json.loads(_ask("ideas", {**hints, "seen_codes": seen}).text.split("```json\n")[1].split("```")[0])
    assert not any(i["params"] in tried for i in rest["ideas"])


def test_code_renders_the_idea_and_branches_differ():
    idea = {"id": 7, "title": "BLOCK 4096 with 16 warps", "description": "d",
            "meta": {"params": {**SPACE.default, "BLOCK": 4096, "num_warps": 16}, "fixed": ["BLOCK", "num_warps"]}}
    codes = [extract_code(_ask("code", {"problem": {"builtin": "softmax"}, "idea": idea, "seed_code": STARTER,
                                        "branch": b, "branches": 3}).text) for b in range(3)]
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
    hints = {"problem": {"builtin": "softmax"}, "n": 50, "round": 1, "seen_codes": [],
             "seeds": [{"kernel_id": 1, "code": STARTER}]}
    raw = json.loads(_ask("ideas", hints).text.split("```json\n")[1].split("```")[0])["ideas"]
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
    hints = {"problem": {"builtin": "softmax"}, "n": 80, "round": 1, "seen_codes": []}
    on_plain = json.loads(_ask("ideas", {**hints, "seeds": [{"kernel_id": 1, "code": plain}]}).text
                          .split("```json\n")[1].split("```")[0])["ideas"]
    tried = [(i["title"], i["description"]) for i in on_plain]
    assert "BLOCK 2048 with 8 warps" in [t for t, _ in tried]
    seed = {"kernel_id": 2, "code": STARTER, "tried": tried}   # the pipelined starter, under that root
    again = json.loads(_ask("ideas", {**hints, "seen_codes": [plain], "seeds": [seed]}).text
                       .split("```json\n")[1].split("```")[0])["ideas"]
    # the pipelined row at 8 warps (a kernel no one has written), by one of the BLOCK moves its root tried (the
    # pipelined row sizes its block to the row: the six BLOCK values are one kernel, proposed once)
    eight = [i for i in again if i["title"].endswith("with 8 warps") and i["params"]["num_warps"] == 8]
    assert len(eight) == 1 and eight[0]["title"] in {t for t, _ in tried}
    assert eight[0]["params"]["variant"] == "pipelined" and "(on the pipelined kernel)" in eight[0]["description"]
    # tried on a seed of its own variant (and written: the run's kernels), it is not proposed again
    mine = [(i["title"], i["description"]) for i in again]
    written = [plain] + [SPACE.render(i["params"]) for i in again]
    after = json.loads(_ask("ideas", {**hints, "seen_codes": written, "seeds": [{**seed, "tried": tried + mine}]})
                       .text.split("```json\n")[1].split("```")[0])["ideas"]
    assert after == []

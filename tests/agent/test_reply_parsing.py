"""Reading idea-writer and coder replies: what passes, and the ReplyError kind of what does not."""
from __future__ import annotations

import json

import pytest

from kernelsearch.agent.errors import ReplyError
from kernelsearch.agent.parsing import IdeaDraft, extract_code, looks_like_refusal, parse_ideas

IDEAS = {"ideas": [{"title": "Online softmax", "description": "One pass with a running max and sum."},
                   {"title": "Wider blocks", "description": "BLOCK_SIZE = next power of two of the row."},
                   {"title": "More warps", "description": "num_warps=8 for rows above 4096."}]}


def kind_of(fn, *args, **kw) -> str:
    with pytest.raises(ReplyError) as err:
        fn(*args, **kw)
    return err.value.kind


# --------------------------------------------------------------------------------------------- ideas


@pytest.mark.parametrize("text", [
    json.dumps(IDEAS),
    "```json\n" + json.dumps(IDEAS, indent=2) + "\n```",
    "Here are three ideas.\n\n```json\n" + json.dumps(IDEAS) + "\n```\nGood luck!",
    "```\n" + json.dumps(IDEAS) + "\n```",
    "Ideas: " + json.dumps(IDEAS) + " -- that's all.",
    json.dumps(IDEAS["ideas"]),
])
def test_ideas_in_every_accepted_wrapping(text):
    ideas = parse_ideas(text, min_ideas=3)
    assert ideas == [IdeaDraft("Online softmax", "One pass with a running max and sum."),
                     IdeaDraft("Wider blocks", "BLOCK_SIZE = next power of two of the row."),
                     IdeaDraft("More warps", "num_warps=8 for rows above 4096.")]


def test_last_valid_fence_wins():
    draft = {"ideas": [{"title": "draft", "description": "d"}]}
    text = "```json\n" + json.dumps(draft) + "\n```\nRevised:\n```json\n" + json.dumps(IDEAS) + "\n```"
    assert [i.title for i in parse_ideas(text)] == ["Online softmax", "Wider blocks", "More warps"]


def test_duplicates_and_blank_ideas_dropped_and_max_applied():
    data = {"ideas": IDEAS["ideas"] + [{"title": "  online   SOFTMAX ", "description": "again"},
                                       {"title": "", "description": "no title"}, "not an object"]}
    ideas = parse_ideas(json.dumps(data))
    assert [i.title for i in ideas] == ["Online softmax", "Wider blocks", "More warps"]
    assert len(parse_ideas(json.dumps(data), max_ideas=2)) == 2


def test_seed_kernel_id_is_kept_when_given():
    data = {"ideas": [{"title": "a", "description": "x", "seed": 12}, {"title": "b", "description": "y",
                                                                       "seed": "#7"},
                      {"title": "c", "description": "z", "seed": "the fast one"}, {"title": "d", "description": "w"}]}
    assert [i.seed for i in parse_ideas(json.dumps(data))] == [12, 7, None, None]


def test_too_few_distinct_ideas():
    dup = {"ideas": [IDEAS["ideas"][0], IDEAS["ideas"][0]]}
    assert kind_of(parse_ideas, json.dumps(dup), min_ideas=2) == "too_few"
    assert kind_of(parse_ideas, '{"ideas": []}') == "too_few"


@pytest.mark.parametrize("text", [
    "1. Tile the rows\n2. Use more warps",
    "",
    '{"ideas": "tile the rows"}',
    '{"thoughts": [1, 2]}',
    '{"ideas": [{"name": "x", "text": "y"}]}',
    '```json\n{"ideas": [{"title": "x", "description": "y"},]}\n```',  # trailing comma: not JSON
])
def test_malformed_ideas(text):
    assert kind_of(parse_ideas, text) == "malformed"


def test_truncated_ideas():
    cut = json.dumps(IDEAS)[:60]
    assert kind_of(parse_ideas, cut, finish_reason="length") == "truncated"
    assert kind_of(parse_ideas, cut) == "malformed"  # the same text, not flagged as cut off
    # cut off after the JSON closed: the ideas are whole, so they stand
    assert len(parse_ideas(json.dumps(IDEAS) + "\nAnd one more thing", finish_reason="length")) == 3


def test_refused_ideas():
    assert kind_of(parse_ideas, "I'm sorry, but I can't help with that.") == "refused"
    assert kind_of(parse_ideas, json.dumps(IDEAS), finish_reason="refusal") == "refused"


# --------------------------------------------------------------------------------------------- code


def test_last_python_block_wins():
    text = ("First a draft:\n```python\nx = 1\n```\nand the shell:\n```bash\nls\n```\n"
            "Final:\n```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n```\nDone.")
    assert extract_code(text) == "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


@pytest.mark.parametrize("fence", ["```python", "```py", "```Python3", "````python", "```python title=k.py"])
def test_python_fence_spellings(fence):
    ticks = fence[:len(fence) - len(fence.lstrip("`"))]
    assert extract_code(f"{fence}\ny = 2\n{ticks}\n") == "y = 2\n"


def test_inner_triple_backticks_in_longer_fence():
    text = '````python\ns = """\n```\n"""\n````'
    assert extract_code(text) == 's = """\n```\n"""\n'


@pytest.mark.parametrize("text", [
    "Use a larger BLOCK_SIZE.",
    "```\nx = 1\n```",             # unlabelled: not the contract
    "```cuda\n__global__ void k() {}\n```",
    "```python\n\n```",
])
def test_malformed_code(text):
    assert kind_of(extract_code, text) == "malformed"


def test_truncated_code():
    open_block = "Here:\n```python\nimport triton\n@triton.jit\ndef _k(x,"
    assert kind_of(extract_code, open_block, finish_reason="length") == "truncated"
    assert kind_of(extract_code, open_block) == "truncated"  # a block that never closes
    # a complete block followed by a second one that was cut: the cut one was the answer
    text = "```python\nx = 1\n```\nBetter:\n```python\ny = "
    assert kind_of(extract_code, text, finish_reason="length") == "truncated"
    # cut in the prose after the last complete block: the code stands
    assert extract_code("```python\nx = 1\n```\nThis kernel fuses the", finish_reason="length") == "x = 1\n"
    assert kind_of(extract_code, "I think we should", finish_reason="length") == "truncated"


def test_refused_code():
    assert kind_of(extract_code, "I cannot help with writing that kernel.") == "refused"
    assert kind_of(extract_code, "```python\nx = 1\n```", finish_reason="refusal") == "refused"
    # an apology with code attached is an answer
    assert extract_code("Sorry for the delay!\n```python\nx = 1\n```") == "x = 1\n"


def test_refusal_heuristic_is_narrow():
    assert looks_like_refusal("I'm unable to assist with that.")
    assert not looks_like_refusal("I can make this faster by fusing the two passes.")
    assert not looks_like_refusal("The kernel can't use TMA on this GPU.")


def test_code_over_the_size_cap_is_malformed_not_stored():
    """A coder reply whose kernel is over 1 MB is refused here, the one place every coder kernel passes before
    it is stored: the reply is recorded as malformed and the coder asked once more, as for any broken reply."""
    from kernelsearch.judge.static import MAX_SOURCE_BYTES

    body = "import torch\n" + "# pad\n" * ((MAX_SOURCE_BYTES - 13) // 6)
    assert extract_code(f"```python\n{body}```\n") == body   # just under the cap: kept
    big = body + "x = 1\n" * 10
    with pytest.raises(ReplyError) as info:
        extract_code(f"```python\n{big}```\n")
    assert info.value.kind == "malformed"
    assert str(info.value) == (f"the ```python block: source is {len(big.encode())} bytes, over the 1 MB cap "
                               f"({MAX_SOURCE_BYTES} bytes)")
    with pytest.raises(ReplyError, match="NUL byte"):
        extract_code("```python\nclass ModelNew:\n    x = '\x00'\n```\n")

"""Reading the two kinds of LLM reply: the idea writer's JSON and the coder's fenced Python.

The contract the prompts state (prompts/ holds the wording):
- ideas: `{"ideas": [{"title": ..., "description": ...}, ...]}`, alone or in a ```json fence;
- code: the kernel is the LAST ```python fenced block of the reply (earlier blocks may be drafts).

A reply that breaks the contract raises `ReplyError(kind=...)`, which the caller records as data:
  malformed  no code block; not JSON; JSON of the wrong shape
  truncated  the reply hit max_tokens (finish_reason "length") before the needed part was complete
  refused    the model declined (finish_reason "refusal", or a bare apology with no code)
  too_few    valid ideas, but fewer distinct ones than asked for
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from kernelsearch.agent.errors import ReplyError
from kernelsearch.judge.static import check_size
from kernelsearch.judge.status import CandidateFailure

# A fence opens with ``` (or more backticks) and an optional info string; it closes with the same backticks
# alone on a line. Languages accepted as Python: python, py, python3.
_FENCE = re.compile(r"^(?P<ticks>`{3,})[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=ticks)[ \t]*$",
                    re.MULTILINE | re.DOTALL)
_OPEN_FENCE = re.compile(r"^`{3,}[ \t]*(?P<lang>[\w+-]*)[^\n]*$", re.MULTILINE)
_PY_LANGS = {"python", "py", "python3"}
_REFUSAL_START = re.compile(
    r"^\s*(I'm sorry|I am sorry|Sorry,|I can(?:'|no)t (?:help|assist|comply|do that|provide)|"
    r"I cannot (?:help|assist|comply|do that|provide)|I won't|I will not|I'm not able to|I am not able to|"
    r"I'm unable to|I am unable to)",
    re.IGNORECASE,
)
_EXCERPT = 200


@dataclass(frozen=True)
class IdeaDraft:
    """One idea as the LLM wrote it, before it is stored. `seed`: the kernel id the idea says it changes,
    when the prompt asked for one and the reply gave an integer (or a string of one)."""

    title: str
    description: str
    seed: int | None = None


def _as_int(v: object) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("#").isdigit():
        return int(v.strip().lstrip("#"))
    return None


def _excerpt(text: str) -> str:
    t = text.strip().replace("\n", " ")
    return t if len(t) <= _EXCERPT else t[:_EXCERPT] + "..."


def _check_refusal(text: str, finish_reason: str) -> None:
    if finish_reason == "refusal":
        raise ReplyError(f"the model refused: {_excerpt(text) or '(no text)'}", kind="refused")


def looks_like_refusal(text: str) -> bool:
    """A reply that opens with an apology or a 'cannot help': read as a refusal when it has nothing usable."""
    return bool(_REFUSAL_START.match(text))


# ---------------------------------------------------------------------------------------------- code


def extract_code(text: str, *, finish_reason: str = "stop") -> str:
    """The last ```python fenced block of a coder reply, without the fence.

    Raises ReplyError: refused (finish_reason "refusal", or an apology and no code), truncated (max_tokens
    hit while a python block was still open, or before any block closed), malformed (no python block).
    A reply cut off in the prose after its last complete block still yields that block.
    """
    _check_refusal(text, finish_reason)
    blocks = [(m.end(), m.group("body")) for m in _FENCE.finditer(text)
              if m.group("lang").lower() in _PY_LANGS]
    last_end = blocks[-1][0] if blocks else 0
    tail_opens_python = any(m.group("lang").lower() in _PY_LANGS
                            for m in _OPEN_FENCE.finditer(text, last_end))
    if finish_reason == "length" and (tail_opens_python or not blocks):
        raise ReplyError("the reply was cut off at max_tokens before its python block was complete",
                         kind="truncated")
    if not blocks:
        if looks_like_refusal(text):
            raise ReplyError(f"the model refused: {_excerpt(text)}", kind="refused")
        if tail_opens_python:
            raise ReplyError("the reply opens a ```python block that never closes", kind="truncated")
        raise ReplyError(f"no ```python fenced block in the reply: {_excerpt(text) or '(empty)'}",
                         kind="malformed")
    code = blocks[-1][1].strip("\n")
    if not code.strip():
        raise ReplyError("the last ```python block is empty", kind="malformed")
    try:   # the one place a coder's kernel is refused for its size: nothing over the cap is stored or evaluated
        check_size(code + "\n")
    except CandidateFailure as err:
        raise ReplyError(f"the ```python block: {err.reason}", kind="malformed") from None
    return code + "\n"


# --------------------------------------------------------------------------------------------- ideas


def _json_candidates(text: str) -> list[str]:
    """Texts that may hold the ideas JSON, most likely first: the whole reply, fenced blocks (last first),
    then the span from the first '{' to the last '}'."""
    out = [text.strip()]
    fenced = [m.group("body") for m in _FENCE.finditer(text) if m.group("lang").lower() in ("json", "")]
    out.extend(reversed(fenced))
    i, j = text.find("{"), text.rfind("}")
    if 0 <= i < j:
        out.append(text[i:j + 1])
    return out


def _load_json(text: str) -> object:
    for cand in _json_candidates(text):
        try:
            return json.loads(cand)
        except (json.JSONDecodeError, ValueError):
            continue
    raise ValueError("no JSON")


def parse_ideas(text: str, *, finish_reason: str = "stop", min_ideas: int = 1,
                max_ideas: int | None = None) -> list[IdeaDraft]:
    """The ideas of an idea-writer reply: `{"ideas": [{"title", "description"[, "seed"]}, ...]}`, bare or
    fenced.

    Ideas with an empty title or description are dropped, and so are repeats of a title (case and spacing
    ignored). A bare JSON list of idea objects is accepted too. Returns at most `max_ideas`.
    Raises ReplyError: refused, truncated (max_tokens hit and the JSON incomplete), malformed (no JSON, or
    not that shape), too_few (fewer than `min_ideas` distinct ideas).
    """
    _check_refusal(text, finish_reason)
    try:
        data = _load_json(text)
    except ValueError:
        if finish_reason == "length":
            raise ReplyError("the reply was cut off at max_tokens inside its JSON", kind="truncated") from None
        if looks_like_refusal(text):
            raise ReplyError(f"the model refused: {_excerpt(text)}", kind="refused") from None
        raise ReplyError(f"the ideas reply is not JSON: {_excerpt(text) or '(empty)'}",
                         kind="malformed") from None
    items = data.get("ideas") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ReplyError('the ideas JSON has no "ideas" list', kind="malformed")
    ideas: list[IdeaDraft] = []
    seen: set[str] = set()
    bad = 0
    for item in items:
        if not isinstance(item, dict):
            bad += 1
            continue
        title, desc = item.get("title"), item.get("description")
        if not (isinstance(title, str) and isinstance(desc, str) and title.strip() and desc.strip()):
            bad += 1
            continue
        key = " ".join(title.lower().split())
        if key in seen:
            continue
        seen.add(key)
        ideas.append(IdeaDraft(title=title.strip(), description=desc.strip(), seed=_as_int(item.get("seed"))))
    if not ideas and bad:
        raise ReplyError('no idea in the JSON has both a "title" and a "description" string',
                         kind="malformed")
    if len(ideas) < min_ideas:
        raise ReplyError(f"asked for {min_ideas} distinct ideas, the reply has {len(ideas)}", kind="too_few")
    return ideas if max_ideas is None else ideas[:max_ideas]

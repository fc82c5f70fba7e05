"""The rooms of docs/design.md import one way, no two modules import each other round a circle, and no module grows
long without saying why.

Order, bottom to top: store <- judge <- families <- generators <- sandbox <- agent <- search <- kernelsearch (the
CLI: cli, config, runner, views). The judge (the trusted part) imports only itself and the store. A module may
import its own room and the rooms below it, never one above. prompts/ is data: the rooms from agent up may read it.
The imports are read from the source (ast), every one of them: at the top, inside functions, under
`if TYPE_CHECKING:`, and `importlib.import_module("kernelsearch....")` with a literal name.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Iterator, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]

ORDER = ["store", "judge", "families", "generators", "sandbox", "agent", "search", "kernelsearch"]   # bottom to top
DATA = {"prompts": "agent"}   # a data room, and the lowest room that may read it
MAX_LINES = 500
# A long module says why in its docstring: "long because ...", "past 500 lines on purpose: ..."
REASON = re.compile(r"\b(long|lines)\b[^.]*?\b(because|on purpose)\b", re.IGNORECASE)


def _room_of(module: str) -> Optional[str]:
    """The room of a dotted module name of ours (`kernelsearch.store.queries` -> store), None for anything else."""
    parts = module.split(".")
    if parts[0] != "kernelsearch":
        return None
    if len(parts) > 1 and parts[1] in ORDER[:-1] + list(DATA):
        return parts[1]
    return "kernelsearch"


def _allowed(importer: str, imported: str) -> bool:
    if imported in DATA:
        return importer in ORDER and ORDER.index(importer) >= ORDER.index(DATA[imported])
    if importer in DATA:
        return False   # data imports nothing
    return ORDER.index(imported) <= ORDER.index(importer)


def _modules() -> Iterator[tuple[str, Path]]:
    """(dotted name, file) of every Python file of the package, as package-dir maps the folders."""
    for package, folder in PACKAGE_DIR.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            yield ".".join([package, *parts]), path


def _literal_prefix(node: ast.expr) -> Optional[str]:
    """The text of a string literal, or of an f-string up to its first placeholder."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


def _imports(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of everything the module imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:   # relative: resolved against the module's own package
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[:len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            for alias in node.names:   # `from kernelsearch import views` imports kernelsearch.views
                yield node.lineno, f"{name}.{alias.name}" if alias.name != "*" else name
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if called in ("import_module", "__import__"):
                text = _literal_prefix(node.args[0])
                if text and text.startswith("kernelsearch"):
                    yield node.lineno, text.rstrip(".")


def _violations() -> list[str]:
    out = []
    for module, path in _modules():
        mine = _room_of(module)
        for line, name in _imports(module, path):
            theirs = _room_of(name)
            if theirs is None or theirs == mine or _allowed(mine, theirs):
                continue
            out.append(f"{path.relative_to(ROOT)}:{line} ({mine}) imports {name} ({theirs})")
    return sorted(set(out))


def test_the_checker_sees_what_it_checks():
    """Every room is found, and an import from above, inside a function or relative, is caught."""
    rooms = {_room_of(m) for m, _ in _modules()}
    assert rooms == set(ORDER) | set(DATA)
    assert _allowed("agent", "prompts") and _allowed("kernelsearch", "store") and _allowed("store", "store")
    assert not _allowed("judge", "prompts") and not _allowed("store", "judge")
    assert not _allowed("judge", "families") and not _allowed("judge", "generators")
    assert not _allowed("families", "generators") and _allowed("generators", "families")
    assert not _allowed("search", "kernelsearch") and not _allowed("prompts", "store")
    assert _room_of("kernelsearch.views.tsv") == "kernelsearch" and _room_of("torch.nn") is None


def test_imports_are_read_everywhere(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text("from typing import TYPE_CHECKING\n"
                   "if TYPE_CHECKING:\n    from kernelsearch.agent import base\n"
                   "def f():\n    import kernelsearch.search.controller\n    from . import queries\n"
                   "    from ..config import Config\n"
                   "import importlib\nimportlib.import_module(f'kernelsearch.sandbox.{x}')\n")
    names = {n for _, n in _imports("kernelsearch.store.mod", src)}
    assert {"kernelsearch.agent.base", "kernelsearch.search.controller", "kernelsearch.store.queries",
            "kernelsearch.config.Config", "kernelsearch.sandbox"} <= names


def test_imports_flow_one_way():
    """store <- judge <- families <- generators <- sandbox <- agent <- search <- kernelsearch (CLI); prompts is data
    read from agent up."""
    bad = _violations()
    assert not bad, f"{len(bad)} import(s) against the layering of docs/design.md:\n  " + "\n  ".join(bad)


def test_long_modules_say_why():
    """No module past ~500 lines unless its docstring says why it is long."""
    long = []
    for _module, path in _modules():
        text = path.read_text(encoding="utf-8")
        n = len(text.splitlines())
        if n <= MAX_LINES:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if not REASON.search(doc):
            long.append(f"{path.relative_to(ROOT)}: {n} lines, and its docstring does not say why")
    assert not long, "\n".join(long)


def _graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (every import, as _imports reads them; `from m import name` is m
    where name is not a module)."""
    files = dict(_modules())
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        for _line, name in _imports(module, path):
            while name and name not in files:
                name = name.rpartition(".")[0]
            if name and name != module:
                graph[module].add(name)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_circle_finder_finds_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    """No module imports another that imports it back, directly or round a longer circle (a package's __init__
    counts as a module: `from kernelsearch.judge import x` imports kernelsearch.judge first)."""
    circles = _circles(_graph())
    assert not circles, f"{len(circles)} import circle(s):\n  " + "\n  ".join(" <-> ".join(c) for c in circles)


JUDGE_MAX_CODE_LINES = 6000   # issue 28: a judge one can read in an afternoon


def _code_lines(path: Path) -> int:
    """Lines of code: not blank, not only a comment, not a docstring."""
    import io
    import tokenize

    src = path.read_text(encoding="utf-8")
    docs: set[int] = set()
    for node in ast.walk(ast.parse(src)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body and \
                isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and \
                isinstance(body[0].value.value, str):
            docs.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines: set[int] = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type not in skip:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - docs)


def test_the_code_line_counter_counts_code_only(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('"""doc\nstring"""\n# comment\n\nx = 1  # trailing\n\n\n'
                   'def f():\n    """doc"""\n    return (1,\n            2)\n')
    assert _code_lines(src) == 4   # x = 1, def f, and the two lines of the return


def test_the_judge_stays_small():
    """The judge (kernelsearch.judge, the part a candidate attacks) stays under JUDGE_MAX_CODE_LINES lines of code."""
    files = sorted((ROOT / PACKAGE_DIR["kernelsearch.judge"]).rglob("*.py"))
    total = sum(_code_lines(p) for p in files)
    assert total < JUDGE_MAX_CODE_LINES, f"the judge has {total} lines of code in {len(files)} files"

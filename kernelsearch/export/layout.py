"""What every export writes, whatever the kernel's language: the name rules, the file digests `kernels` checks,
metadata.json, SHA256SUMS, the README, and the directory's replacement.

The layout is the one `kernels` loads (read from 0.19.1's source; the Triton variant also loads with 0.17.2):

    build/<variant>/__init__.py            the module get_local_kernel imports (as a package named metadata's `id`)
    build/<variant>/metadata.json          id, name, version, license, python-depends, backend {type, archs},
                                           digest {algorithm: sha256, files: {relative path: base64 sha256}}
    build/<variant>/<python_name>/__init__.py   the compatibility package older loaders import
    build.toml                             [general] edition 6 (name, version, license, backends) and the
                                           language's section: [torch-noarch] for Triton, [torch] + [kernel.*]
                                           for CUDA C++. Edition 6 is what kernel-builder now requires; kernels
                                           0.17's parser reads up to edition 5, 0.19's reads both

`kernels` hashes every file of the variant directory but metadata.json (and bytecode) and refuses to load a
variant whose files do not match the digest; `digest_files` computes the same digest (tests check it against
kernels' own `Digest.hash_variant`).
"""
from __future__ import annotations

import base64
import hashlib
import json
import keyword
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

NAME_RE = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]$")   # kernels' KernelName
# What an export writes at the top of its directory; --overwrite replaces these and leaves anything else there.
OWN_ENTRIES = ("build", "torch-ext", "csrc", "README.md", "build.toml", "SHA256SUMS", "candidate.py")
# CUDA compute capabilities by device name, for metadata's `archs` (the device the evaluation ran on)
CAPABILITIES = {"GH200": "9.0", "H200": "9.0", "H100": "9.0", "H800": "9.0", "H20": "9.0", "B200": "10.0",
                "B100": "10.0", "A100": "8.0", "A800": "8.0", "A30": "8.0", "A10": "8.6", "L40": "8.9",
                "L4": "8.9", "RTX 4090": "8.9", "RTX 3090": "8.6", "V100": "7.0", "T4": "7.5"}


class ExportError(Exception):
    """The kernel cannot be exported as asked; the message is one line naming what is wrong."""


@dataclass
class Source:
    """What an export is made from, read from the store and the problem."""

    db: str
    run_name: str
    problem: str
    kernel_id: int
    code: str
    language: str
    evaluation: Optional[dict]            # the Evaluation row's columns, None for a kernel never evaluated
    detail: dict = field(default_factory=dict)
    forced: bool = False                  # exported with --force: the evaluation is not ok

    @property
    def code_sha256(self) -> str:
        return hashlib.sha256(self.code.encode("utf-8")).hexdigest()

    @property
    def eval_id(self) -> Optional[int]:
        return self.evaluation["id"] if self.evaluation else None

    @property
    def status(self) -> str:
        return self.evaluation["status"] if self.evaluation else "queued (never evaluated)"


def default_name(problem: str, kernel_id: int) -> str:
    """`softmax-k12`: the problem's name (a file's stem) lowered to kernels' name rule, and the kernel's id."""
    stem = Path(problem).stem if problem.endswith(".py") else problem
    slug = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-") or "kernel"
    if not slug[0].isalpha():
        slug = f"op-{slug}"
    return f"{slug}-k{kernel_id}"


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise ExportError(f"--name {name!r} is not a kernel name: lower-case letters, digits and dashes, starting "
                          "with a letter and not ending with a dash (kernels' rule ^[a-z][-a-z0-9]*[a-z0-9]$)")
    return name


def python_name(name: str) -> str:
    return name.replace("-", "_")


def op_name(problem: str) -> str:
    """The plain function's name: the problem's name as a Python identifier (`softmax`, `op_23_softmax`)."""
    stem = Path(problem).stem if problem.endswith(".py") else problem
    ident = re.sub(r"\W+", "_", stem.lower()).strip("_") or "op"
    if not ident[0].isalpha():
        ident = f"op_{ident}"
    if keyword.iskeyword(ident) or ident in ("torch", "ModelNew", "INIT_INPUTS", "kernel"):
        ident = f"{ident}_op"
    return ident


def capability(device: Optional[str]) -> Optional[str]:
    """The compute capability of a CUDA device named `device`, where the name is known here."""
    if not device:
        return None
    for key in sorted(CAPABILITIES, key=len, reverse=True):   # GH200 before H200
        if re.search(rf"\b{re.escape(key)}\b", device):
            return CAPABILITIES[key]
    return None


def digest_files(variant: Path) -> dict[str, str]:
    """{relative path: base64 sha256} of every file of a variant directory but metadata.json and bytecode: the
    digest kernels' DigestValidator recomputes at load."""
    out = {}
    for p in sorted(variant.rglob("*")):
        rel = p.relative_to(variant).as_posix()
        if p.is_dir() or rel in ("metadata.json", "metadata.json.sigstore") or "__pycache__" in p.parts \
                or p.suffix == ".pyc":
            continue
        out[rel] = base64.b64encode(hashlib.sha256(p.read_bytes()).digest()).decode()
    return out


def build_id(name: str, variant: Path) -> str:
    """The kernel's id (the name kernels imports its module under, which must be unique to a build): the python
    name and a digest of the files now in `variant`."""
    manifest = "".join(f"{k} {v}\n" for k, v in digest_files(variant).items()).encode()
    return f"_{python_name(name)}_{hashlib.sha256(manifest).hexdigest()[:12]}"


def write_metadata(variant: Path, *, kid: str, name: str, license: str, archs: Optional[list[str]], src: Source,
                   speedups: dict) -> None:
    """metadata.json for the files now in `variant`, with their digest."""
    files = digest_files(variant)
    backend: dict = {"type": "cuda"}
    if archs:
        backend["archs"] = archs
    meta = {
        "id": kid, "name": name, "version": 1, "license": license, "python-depends": [], "backend": backend,
        "digest": {"algorithm": "sha256", "files": files},
        # read by nothing in kernels (it ignores keys it does not know): where the kernel came from
        "kernelsearch": {"store": src.db, "run": src.run_name, "problem": src.problem, "kernel_id": src.kernel_id,
                         "evaluation_id": src.eval_id, "status": src.status, "forced": src.forced,
                         "kernel_sha256": src.code_sha256, **speedups},
    }
    (variant / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")


def write_sums(root: Path) -> str:
    """SHA256SUMS (`sha256sum -c` reads it) of every file under `root`; returns the sha256 of that file, the
    export's checksum kept in the store."""
    lines = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != "SHA256SUMS" and "__pycache__" not in p.parts:
            lines.append(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(root).as_posix()}\n")
    text = "".join(lines)
    (root / "SHA256SUMS").write_text(text)
    return hashlib.sha256(text.encode()).hexdigest()


def check_target(target: Path, overwrite: bool) -> None:
    if target.exists() and not target.is_dir():
        raise ExportError(f"{target} exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        raise ExportError(f"{target} exists and is not empty (--overwrite replaces an export's files there)")


def staging(target: Path) -> Path:
    """A fresh directory beside `target` (same file system) to write the export into before it is moved."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))


def move_into(staged: Path, target: Path) -> None:
    """Move the staged export into `target`: the export's own entries there are replaced, nothing else is
    touched."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in OWN_ENTRIES:
        old = target / entry
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        elif old.exists() or old.is_symlink():
            old.unlink()
    for p in staged.iterdir():
        p.rename(target / p.name)
    staged.rmdir()


def fmt_x(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.3g}x"


def fmt_ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.4g} ms"


def cases_table(detail: dict) -> list[str]:
    """The correctness cases of the evaluation's detail, one Markdown row per case: trials, passed, worst
    errors."""
    rows: dict[str, dict] = {}
    for c in detail.get("cases") or []:
        if not isinstance(c, dict) or "case" not in c:
            continue
        r = rows.setdefault(str(c["case"]), {"trials": 0, "ok": 0, "skipped": None, "abs": None, "rel": None})
        if "skipped" in c:
            r["skipped"] = c["skipped"]
            continue
        r["trials"] += 1
        r["ok"] += bool(c.get("ok"))
        for k, col in (("abs", "max_abs"), ("rel", "max_rel")):
            v = c.get(col)
            if isinstance(v, (int, float)):
                r[k] = v if r[k] is None else max(r[k], v)
    if not rows:
        return ["(the evaluation recorded no correctness cases)"]
    out = ["| case (shape; dtype) | trials | passed | max abs error | max rel error |", "|---|---|---|---|---|"]
    for case, r in rows.items():
        if r["skipped"] and not r["trials"]:
            out.append(f"| `{case}` | 0 | skipped: {r['skipped']} | - | - |")
            continue
        e = [("-" if r[k] is None else f"{r[k]:.3g}") for k in ("abs", "rel")]
        out.append(f"| `{case}` | {r['trials']} | {r['ok']} | {e[0]} | {e[1]} |")
    return out


def _of(n, what: str) -> str:
    """" (median of 3 timings)" for a median of more than one."""
    return f" (median of {n} {what}s)" if isinstance(n, int) and n > 1 else ""


def readme(src: Source, *, name: str, title_line: str, usage: list[str], problem: list[str],
           layout_notes: list[str], files: dict[str, str]) -> str:
    """The README: the problem, what the kernel was checked on, where and how fast, and its provenance."""
    ev = src.evaluation or {}
    lines = [f"# {name}", "", title_line, ""]
    if src.forced:
        why = f": {ev.get('reason')}" if ev.get("reason") else ""
        lines += [f"> **Warning: this kernel did not pass kernelsearch's evaluation** (status `{src.status}`{why}). "
                  "It was exported with `--force`; its results may be wrong.", ""]
    lines += ["## Use", "", *usage, "", "## Problem", "",
              f"- problem: `{src.problem}`", *problem,
              f"- kernel: k{src.kernel_id} of run `{src.run_name}` in the kernelsearch store `{src.db}`",
              f"- evaluation: {src.eval_id if src.eval_id is not None else 'none'} (status `{src.status}`"
              f"{', stage ' + str(ev.get('stage')) if ev.get('stage') else ''})", "",
              "## Checked on", "",
              "Outputs were compared with the reference on fresh random inputs, per case:", "",
              *cases_table(src.detail), ""]
    timing_case = src.detail.get("timing_case")
    kind = ev.get("timing_kind")
    lines += ["## Measured", "",
              f"- device: {ev.get('device') or 'unknown'}; timing: {kind or 'none'}"
              + (f"; timed case: `{timing_case}`" if timing_case else ""),
              f"- kernel {fmt_ms(ev.get('time_ms'))}{_of(ev.get('timings'), 'timing')}, eager reference "
              f"{fmt_ms(ev.get('ref_time_ms'))}{_of(ev.get('ref_timings'), 'evaluation')}: speedup "
              f"{fmt_x(ev.get('speedup'))} over eager, "
              + (f"{fmt_x(ev['speedup_compile'])} over torch.compile" if ev.get("speedup_compile") is not None
                 else "not measured against torch.compile"),
              ]
    if ev.get("timings"):
        lines.append("- the kernel's time is the median of its timings (its evaluation and its re-timings as a "
                     "finalist); the reference is the run's figure on this device, the median of the reference "
                     "times its evaluations measured side by side")
    if ev.get("roofline_fraction") is not None:
        lines.append(f"- {ev['roofline_fraction']:.0%} of the device's roofline ({ev.get('bottleneck') or '?'}-bound)")
    if kind == "cpu-interpreter":
        lines.append("- these are CPU timings of Triton's interpreter, not GPU timings: they say nothing about "
                     "the kernel's speed on a GPU")
    lines += ["", "## Layout", "", *layout_notes, "", "## Files", "",
              "`SHA256SUMS` lists every file with its sha256 (`sha256sum -c SHA256SUMS`); the kernel's own files:", ""]
    lines += [f"- `{path}`: {what}" for path, what in files.items()]
    return "\n".join(lines) + "\n"

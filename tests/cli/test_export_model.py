"""`kernelsearch export --model RUN`: a small model run (the offline provider, CPU) whose verify step accepted an
rmsnorm kernel (a module unit) and a softmax kernel (an operator unit), exported as one `kernels` repository,
loaded with kernels.get_local_kernel, and patched into a fresh instance of the model: the output matches the
original at the model's tolerance, and the exported kernels are the ones that ran. Then what verify left out, and
the refusals, one line each.
"""
from __future__ import annotations

import importlib.util
import io
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
import torch
from rich.console import Console
from typer.testing import CliRunner

from kernelsearch.cli import app
from kernelsearch.config import load_config
from kernelsearch.export.layout import digest_files
from kernelsearch.model.pipeline import start_model_run
from kernelsearch.model.profile import first_tensor, load_model, model_inputs
from kernelsearch.model.verify import rel_error

ROOT = Path(__file__).resolve().parents[2]
MODEL = Path(__file__).resolve().parent / "fixtures" / "norm_softmax_model.py"
NORM, SOFTMAX = "rmsnorm-32x64-float32", "softmax-128x16-float32"
# the module's fixture runs a whole model search on the interpreter (33 s of `make test`'s 10 min on two cores):
# with the slow tests, which CI runs after `make test`
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished model run "m" of the fixture model: rmsnorm and softmax searched (1 evaluation each), verified."""
    d = tmp_path_factory.mktemp("model-run")
    cfg = d / "model.yaml"
    cfg.write_text(f"model: {MODEL}\nstore: {d / 'm.db'}\ndevice: cpu\nllm: {{provider: offline}}\n"
                   "search: {rounds: 1, ideas_per_round: 1, branches_per_idea: 1, seeds_per_round: 1, concurrency: 2}\n"
                   "budgets: {evaluations: 2}\n"
                   "evaluation: {timeout_s: 120, trials: 1, aot_compile: false}\n"
                   "plan: {min_share: 0.0, min_gain: 0.0, max_problems: 2, min_evaluations: 0}\n"
                   "verify: {iters: 1, seed: 3}\n")
    start_model_run(load_config(cfg), d / "m.db", "m", Console(file=io.StringIO(), width=200))
    verify = json.loads(_one(d / "m.db", "SELECT verify_json FROM modelrun"))
    assert sorted(verify["accepted"]) == [NORM, SOFTMAX], verify
    return d / "m.db"


def _one(db: Path, sql: str, *args):
    with sqlite3.connect(db) as con:
        return con.execute(sql, args).fetchone()[0]


def _copy(db: Path, tmp_path: Path) -> Path:
    """The store as it is, write-ahead log included (a test's edits stay in its copy)."""
    out = tmp_path / "m.db"
    with sqlite3.connect(db) as src, sqlite3.connect(out) as dst:
        src.backup(dst)
    return out


def _edit_verify(db: Path, edit) -> None:
    with sqlite3.connect(db) as con:
        v = con.execute("SELECT verify_json FROM modelrun").fetchone()[0]
        con.execute("UPDATE modelrun SET verify_json = ?", (None if edit is None else json.dumps(edit(json.loads(v))),))


def export(db: Path, *args: str):
    return CliRunner().invoke(app, ["export", *args, "--db", str(db)])


def _load(out: Path):
    from kernels import get_local_kernel

    return get_local_kernel(out / "build" / "torch-cuda")


def test_the_export_patches_a_fresh_model_with_the_verified_kernels(finished, tmp_path):
    db = _copy(finished, tmp_path)
    out = tmp_path / "hf"
    r = export(db, "--model", "m", "--hf", str(out))
    assert r.exit_code == 0, r.output
    assert "exported 2 kernel(s) of model run m" in r.output
    variant = out / "build" / "torch-cuda"
    from kernels._rust import Backend, Build, Digest, DigestAlgorithm, Metadata

    parsed = Metadata.read_from_file(variant / "metadata.json")   # kernels' own parsers and digest
    assert str(parsed.name) == "norm-softmax-model-m" and parsed.digest is not None
    assert Digest.hash_variant(DigestAlgorithm.SHA256, variant).files == parsed.digest.files == digest_files(variant)
    assert {"__init__.py", "_swap.py", "winners/rmsnorm_32x64_float32.py", "winners/softmax_128x16_float32.py",
            "norm_softmax_model_m/__init__.py"} <= set(parsed.digest.files)
    assert "[torch-noarch]" in (out / "build.toml").read_text() and Build.open(out).general.backends == [Backend.CUDA]
    assert (variant / "_swap.py").read_bytes() == (ROOT / "kernelsearch" / "model" / "swap.py").read_bytes()
    assert subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=out).returncode == 0
    meta = json.loads((variant / "metadata.json").read_text())
    ks = meta["kernelsearch"]
    assert ks["model_run"] == "m" and not ks["forced"] and ks["model_speedup"]["speedup"] > 0
    by_key = {k["key"]: k for k in ks["kernels"]}
    assert set(by_key) == {NORM, SOFTMAX}
    with sqlite3.connect(db) as con:
        for key, k in by_key.items():
            code = con.execute("SELECT code FROM kernel WHERE id = ?", (k["kernel_id"],)).fetchone()[0]
            assert (variant / k["file"]).read_bytes() == code.encode()   # the evaluated file, byte for byte
            assert k["evaluation_id"] == con.execute("SELECT id FROM evaluation WHERE kernel_id = ?",
                                                     (k["kernel_id"],)).fetchone()[0]
            assert k["eval_speedup"] > 0 and k["model_rel_error"] is not None and k["shapes"]
        rows = con.execute("SELECT kernel_id, checksum FROM kernelexport").fetchall()
    assert sorted(k for k, _ in rows) == sorted(k["kernel_id"] for k in by_key.values())
    readme = (out / "README.md").read_text()
    assert "patch(model)" in readme and "not GPU timings" in readme and "No searched problem's kernel was left out" \
        in readme and f"evaluation {by_key[NORM]['evaluation_id']}" in readme

    k = _load(out)
    assert {"patch", "rmsnorm_32x64_float32", "softmax_128x16_float32"} <= set(k.__all__)
    spec = importlib.util.spec_from_file_location("ks_test_model_compat", variant / "norm_softmax_model_m" /
                                                  "__init__.py")
    compat = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compat)
    assert compat.patch is k.patch and compat.rmsnorm_32x64_float32 is k.rmsnorm_32x64_float32
    model, module = load_model(str(MODEL), "cpu", 0)
    x = model_inputs(module, "cpu", 11)
    with torch.no_grad():
        ref = first_tensor(model(*x)).clone()
    calls: dict[str, int] = {}
    for key, mod in k._MODULES.items():   # count the exported kernels' calls
        forward = mod.ModelNew.forward

        def counted(self, *a, _f=forward, _key=key, **kw):
            calls[_key] = calls.get(_key, 0) + 1
            return _f(self, *a, **kw)
        mod.ModelNew.forward = counted
    handle = k.patch(model)
    assert type(model.layers[0].norm.k) is k._MODULES[NORM].ModelNew
    with pytest.raises(ValueError, match="patched already"):
        k.patch(model)
    with torch.no_grad():
        out_patched = first_tensor(model(*x))
    assert calls == {NORM: 3, SOFTMAX: 2}   # 3 RMSNorm modules, a softmax in each of the 2 blocks
    tol = json.loads(_one(db, "SELECT verify_json FROM modelrun"))["tolerance"]
    assert rel_error(out_patched, ref) <= tol
    handle.remove()
    calls.clear()
    with torch.no_grad():
        assert torch.equal(first_tensor(model(*x)), ref)
    assert calls == {} and type(model.layers[0].norm).__name__ == "RMSNorm"
    other = torch.nn.Sequential(torch.nn.Linear(64, 64))
    with pytest.raises(ValueError, match="the model has no module 'layers.0.norm'"):
        k.patch(other)   # not the run's model: said, and nothing is left installed
    assert not other._forward_pre_hooks and "forward" not in vars(other)
    y = k.softmax_128x16_float32(x[0].reshape(-1, 16))   # the plain function
    torch.testing.assert_close(y, torch.softmax(x[0].reshape(-1, 16), dim=-1), rtol=1e-5, atol=1e-6)


def test_a_kernel_verify_left_out_is_not_exported_and_the_readme_says_why(finished, tmp_path):
    db = _copy(finished, tmp_path)

    def broke(v):
        for p in v["problems"]:
            if p["key"] == NORM:
                p.update(status="breaks_model", reason="relative error 0.5 over the model's tolerance 0.0001")
        v["accepted"] = [SOFTMAX]
        return v
    _edit_verify(db, broke)
    out = tmp_path / "hf"
    r = export(db, "--model", "m", "--hf", str(out), "--name", "just-softmax")
    assert r.exit_code == 0, r.output
    assert f"left out {NORM}: breaks_model: relative error 0.5" in r.output
    meta = json.loads((out / "build" / "torch-cuda" / "metadata.json").read_text())
    assert meta["name"] == "just-softmax" and [k["key"] for k in meta["kernelsearch"]["kernels"]] == [SOFTMAX]
    assert not (out / "build" / "torch-cuda" / "winners" / "rmsnorm_32x64_float32.py").exists()
    readme = (out / "README.md").read_text()
    assert f"| `{NORM}` |" in readme and "breaks_model: relative error 0.5" in readme
    k = _load(out)
    assert "rmsnorm_32x64_float32" not in k.__all__
    model, _ = load_model(str(MODEL), "cpu", 0)
    handle = k.patch(model)
    assert type(model.layers[0].norm).__name__ == "RMSNorm"   # left in place
    handle.remove()


def test_on_a_gpu_a_kernel_no_faster_than_eager_is_listed_as_left_out(finished, tmp_path):
    """verify on a GPU is given only the best kernels faster than eager (pipeline._winners); the others are not
    exported, and the README says why."""
    db = _copy(finished, tmp_path)

    def gpu(v):
        v["problems"] = [p for p in v["problems"] if p["key"] != NORM]
        v["accepted"], v["device"] = [SOFTMAX], "cuda"
        return v
    _edit_verify(db, gpu)
    with sqlite3.connect(db) as con:   # its child run's best kernel: slower than eager (every timing 1 ms against
        #                                a reference read at 0.8 ms: the run's figure over the kernel's own time)
        con.execute("UPDATE evaluation SET speedup = 0.8, time_ms = 1.0, ref_time_ms = 0.8 WHERE time_ms IS NOT NULL "
                    "AND kernel_id IN (SELECT k.id FROM kernel k JOIN run r ON r.id = k.run_id WHERE r.name = ?)",
                    (f"m.{NORM}",))
    out = tmp_path / "hf"
    r = export(db, "--model", "m", "--hf", str(out))
    assert r.exit_code == 0 and f"left out {NORM}: not_faster: its best kernel (0.8x of eager)" in r.output, r.output
    assert "not faster than the operator it would replace" in (out / "README.md").read_text()
    assert not (out / "build" / "torch-cuda" / "winners" / "rmsnorm_32x64_float32.py").exists()


@pytest.mark.parametrize("args, fragment", [
    (["--model", "nope"], "no model run named 'nope'"),
    (["--model", f"m.{NORM}"], "is a run but not a model run"),
    (["3", "--model", "m"], "give no KERNEL_ID or --run with it"),
])
def test_refusals_are_one_line_and_write_nothing(finished, tmp_path, args, fragment):
    out = tmp_path / "hf"
    r = export(_copy(finished, tmp_path), *args, "--hf", str(out))
    assert r.exit_code == 2 and fragment in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert not out.exists()


def test_a_model_run_without_verified_kernels_is_refused_unless_forced(finished, tmp_path):
    db = _copy(finished, tmp_path)

    def none(v):
        for p in v["problems"]:
            p.update(status="breaks_model", reason="relative error 1 over the model's tolerance 0.0001")
        v["accepted"] = []
        return v
    _edit_verify(db, none)
    out = tmp_path / "hf"
    for extra in ([], ["--force"]):   # kernels verify rejected are not exported even with --force
        r = export(db, "--model", "m", "--hf", str(out), *extra)
        assert r.exit_code == 2 and "has no verified kernels (verify accepted none of its kernels" in r.output
        assert len(r.output.strip().splitlines()) == 1 and not out.exists()
    _edit_verify(db, None)   # verify never ran: --force exports the child runs' best kernels, unverified
    r = export(db, "--model", "m", "--hf", str(out))
    assert r.exit_code == 2 and "its verify step has not run" in r.output and "--force" in r.output
    r = export(db, "--model", "m", "--hf", str(out), "--force")
    assert r.exit_code == 0 and "were not verified in the model; exported with --force" in r.output
    assert "these kernels were not verified in the whole model" in (out / "README.md").read_text()
    assert json.loads((out / "build" / "torch-cuda" / "metadata.json").read_text())["kernelsearch"]["forced"]


def test_a_non_empty_directory_is_refused_unless_overwrite(finished, tmp_path):
    db = _copy(finished, tmp_path)
    out = tmp_path / "hf"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    r = export(db, "--model", "m", "--hf", str(out))
    assert r.exit_code == 2 and "exists and is not empty (--overwrite" in r.output
    r = export(db, "--model", "m", "--hf", str(out), "--overwrite")
    assert r.exit_code == 0 and (out / "mine.txt").read_text() == "keep" and (out / "README.md").is_file()

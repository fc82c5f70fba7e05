"""`kernelsearch export`: the softmax family's starter, stored as an ok evaluation, written in the Hugging Face
`kernels` layout, loaded with kernels.get_local_kernel and run under Triton's interpreter on fresh inputs; the
layout checked against kernels' own parsers and digest; the refusals, one line each; an old store without the
export table; and a CUDA (load_inline) kernel's source layout, compile-checked with nvcc where it exists.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from sqlmodel import Session, select
from typer.testing import CliRunner

from kernelsearch.cli import app
from kernelsearch.export.layout import digest_files
from kernelsearch.judge.problem import FAMILIES_DIR
from kernelsearch.store.database import open_store
from kernelsearch.store.models import Evaluation, Kernel, KernelExport, Run

STARTER = (FAMILIES_DIR / "softmax" / "starter.py").read_text()
DETAIL = {"language": "triton", "timing_case": "mid[rows=64,cols=1000; float32]", "cases": [
    {"case": "one[rows=1,cols=1; float32]", "trial": 0, "ok": True, "max_abs": 0.0, "max_rel": 0.0},
    {"case": "odd[rows=7,cols=33; float32]", "trial": 0, "ok": True, "max_abs": 3e-8, "max_rel": 2e-7},
    {"case": "odd[rows=7,cols=33; float32]", "trial": 1, "ok": True, "max_abs": 4e-8, "max_rel": 1e-7},
    {"case": "odd-bf16[rows=5,cols=1000; bfloat16]", "trial": 0, "ok": True, "max_abs": 1e-4, "max_rel": 4e-3}]}
CUDA_KERNEL = '''import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void scale_kernel(const float* x, float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s;
}

torch::Tensor scale(torch::Tensor x, double s) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, n);
    return y;
}
"""
cpp_src = "torch::Tensor scale(torch::Tensor x, double s);"

ext = load_inline(name="scale_ext", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["scale"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.scale(x, 2.0)
'''


def make_store(path: Path) -> Path:
    """Run "r1" (softmax): k1 the starter, ok at 1.5x (evaluation 1); k2 the starter with its max removed,
    incorrect; k3 queued; k4 a CUDA kernel, ok at 1.1x on an H200."""
    engine = open_store(path)
    with Session(engine) as s:
        s.add(Run(id=1, name="r1", problem="softmax", config_json="{}", status="finished"))
        s.flush()
        broken = STARTER.replace("m = tl.max(x, axis=0)", "m = 0.0")
        for kid, code, lang in ((1, STARTER, "triton"), (2, broken, "triton"), (3, STARTER + "\n# queued\n", "triton"),
                                (4, CUDA_KERNEL, "cuda")):
            s.add(Kernel(id=kid, run_id=1, code=code, language=lang,
                         code_hash=hashlib.sha256(code.encode()).hexdigest()[:16]))
        s.flush()
        s.add(Evaluation(kernel_id=1, status="ok", stage="timing", time_ms=2.0, ref_time_ms=3.0, speedup=1.5,
                         timing_kind="cpu-interpreter", device="cpu-interpreter", detail_json=json.dumps(DETAIL)))
        s.add(Evaluation(kernel_id=2, status="incorrect", stage="correctness", reason="case odd: max abs err 0.5",
                         detail_json="{}"))
        s.add(Evaluation(kernel_id=4, status="ok", stage="timing", time_ms=1.0, ref_time_ms=1.1, speedup=1.1,
                         timing_kind="judge-wall-clock", device="NVIDIA H200", detail_json="{}"))
        s.commit()
    engine.dispose()
    return path


@pytest.fixture
def store(tmp_path) -> Path:
    return make_store(tmp_path / "ks.db")


def export(store: Path, *args: str):
    return CliRunner().invoke(app, ["export", *args, "--db", str(store)])


def one_line_error(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in result.output, err
    for f in fragments:
        assert f in err, err
    return err


def test_the_starter_exports_loads_with_kernels_and_computes_softmax(store, tmp_path):
    from kernels import get_local_kernel
    from kernels._rust import Backend, Build, Digest, DigestAlgorithm, Metadata

    out = tmp_path / "softmax-hf"
    r = export(store, "k1", "--hf", str(out))
    assert r.exit_code == 0, r.output
    variant = out / "build" / "torch-cuda"
    assert (variant / "kernel.py").read_bytes() == STARTER.encode()   # byte for byte the evaluated code
    # kernels' own parsers accept metadata.json and build.toml, and its digest of the variant is the one written
    meta = Metadata.read_from_file(variant / "metadata.json")
    assert str(meta.name) == "softmax-k1" and meta.version == 1 and meta.license == "Apache-2.0"
    assert meta.backend.backend_type == Backend.CUDA and meta.digest is not None
    assert Digest.hash_variant(DigestAlgorithm.SHA256, variant).files == meta.digest.files == digest_files(variant)
    assert set(meta.digest.files) == {"__init__.py", "kernel.py", "softmax_k1/__init__.py"}
    assert Build.open(out).general.backends == [Backend.CUDA]
    assert "[torch-noarch]" in (out / "build.toml").read_text()
    raw = json.loads((variant / "metadata.json").read_text())
    assert raw["kernelsearch"]["evaluation_id"] == 1 and raw["kernelsearch"]["kernel_id"] == 1
    assert raw["kernelsearch"]["kernel_sha256"] == hashlib.sha256(STARTER.encode()).hexdigest()

    # on this CPU machine kernels picks no variant for the repository (its only one is for cuda)...
    with pytest.raises(FileNotFoundError, match="torch-cuda"):
        get_local_kernel(out)
    # ...and loads the variant named directly: the digest is checked, the module imported
    k = get_local_kernel(variant)
    gen = torch.Generator().manual_seed(1234)
    for rows, cols, dtype, atol in ((7, 33, torch.float32, 1e-6), (3, 1000, torch.bfloat16, 1e-2),
                                    (3, 4099, torch.float32, 1e-6)):
        x = (torch.randn(rows, cols, generator=gen) * 4).to(dtype)
        y = k.softmax(x)
        torch.testing.assert_close(y.float(), torch.softmax(x.float(), dim=-1), atol=atol, rtol=1.6e-2)
    x = torch.randn(5, 77, generator=gen)
    torch.testing.assert_close(k.ModelNew()(x), torch.softmax(x, dim=-1), atol=1e-6, rtol=1e-4)
    import inspect
    assert list(inspect.signature(k.softmax).parameters) == ["x"]   # ModelNew.forward's parameters

    # the compatibility package re-exports the very same objects
    spec = __import__("importlib.util").util.spec_from_file_location(
        "ks_test_compat", variant / "softmax_k1" / "__init__.py")
    compat = __import__("importlib.util").util.module_from_spec(spec)
    spec.loader.exec_module(compat)
    assert compat.softmax is k.softmax and compat.ModelNew is k.ModelNew

    readme = (out / "README.md").read_text()
    for fragment in ("evaluation: 1 (status `ok`", "k1 of run `r1`", "`odd[rows=7,cols=33; float32]` | 2 | 2",
                     "odd-bf16[rows=5,cols=1000; bfloat16]", "1.5x over eager", "cpu-interpreter",
                     "not GPU timings", "problem: `softmax`"):
        assert fragment in readme, fragment
    assert "Warning" not in readme

    # SHA256SUMS lists every file; the store keeps its checksum with the export
    sums = (out / "SHA256SUMS").read_text()
    assert f"{hashlib.sha256(STARTER.encode()).hexdigest()}  build/torch-cuda/kernel.py" in sums
    assert subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=out).returncode == 0
    engine = open_store(store, readonly=True)
    with Session(engine) as s:
        (row,) = s.exec(select(KernelExport)).all()
    engine.dispose()
    assert (row.kernel_id, row.evaluation_id, row.name, row.forced) == (1, 1, "softmax-k1", False)
    assert row.checksum == hashlib.sha256(sums.encode()).hexdigest()
    assert row.kernel_sha256 == hashlib.sha256(STARTER.encode()).hexdigest()


def test_the_best_kernel_of_a_run_when_no_id_is_given(store, tmp_path):
    """Run "r2": k5 the starter in 2 ms against a reference read at 3 ms (1.5x by its own evaluation), k6 the same
    code renamed in 1.5 ms against a reference read at 1 ms (0.67x). The best is k6, by its own time; every speedup
    is over the run's reference figure, the median of the two readings (2 ms)."""
    engine = open_store(store)
    with Session(engine) as s:
        s.add(Run(id=2, name="r2", problem="softmax", config_json="{}", status="finished"))
        s.flush()
        for kid, t, ref in ((5, 2.0, 3.0), (6, 1.5, 1.0)):
            code = STARTER.replace("import torch\n", f"import torch  # k{kid}\n", 1)
            s.add(Kernel(id=kid, run_id=2, code=code, code_hash=hashlib.sha256(code.encode()).hexdigest()[:16]))
            s.flush()
            s.add(Evaluation(kernel_id=kid, status="ok", stage="timing", time_ms=t, ref_time_ms=ref, speedup=ref / t,
                             timing_kind="cpu-interpreter", device="cpu-interpreter", detail_json=json.dumps(DETAIL)))
        s.commit()
    engine.dispose()
    r = export(store, "--run", "r2", "--hf", str(tmp_path / "best"), "--name", "my-softmax")
    assert r.exit_code == 0, r.output
    assert "exported k6 " in r.stdout
    meta = json.loads((tmp_path / "best" / "build" / "torch-cuda" / "metadata.json").read_text())["kernelsearch"]
    assert meta["speedup"] == pytest.approx(2.0 / 1.5) and (meta["time_ms"], meta["ref_time_ms"]) == (1.5, 2.0)
    assert meta["eval_speedup"] == pytest.approx(1 / 1.5) and (meta["timings"], meta["ref_timings"]) == (1, 2)
    readme = (tmp_path / "best" / "README.md").read_text()
    assert "kernel 1.5 ms, eager reference 2 ms (median of 2 evaluations): speedup 1.33x over eager" in readme


def _nothing_written(store: Path, target: Path) -> None:
    assert not target.exists() or not any(p for p in target.iterdir() if p.name != "mine.txt")
    assert not [p for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]   # no staging left
    con = sqlite3.connect(store)
    try:
        n = con.execute("SELECT count(*) FROM kernelexport").fetchone()[0]
    except sqlite3.OperationalError:
        n = 0
    con.close()
    assert n == 0


@pytest.mark.parametrize("args, fragments", [
    (["k99"], ["no kernel 99 in"]),
    (["kx"], ["not a kernel id: 'kx'"]),
    (["k2"], ["kernel 2 did not pass its evaluation (status incorrect: case odd: max abs err 0.5)", "--force"]),
    (["k3"], ["kernel 3 was never evaluated", "--force"]),
    ([], ["give a kernel id, or --run RUN"]),
    (["--run", "nope"], ["no run named 'nope'"]),
    (["k1", "--name", "Soft_Max"], ["--name 'Soft_Max' is not a kernel name"]),
])
def test_refusals_are_one_line_and_write_nothing(store, tmp_path, args, fragments):
    target = tmp_path / "out"
    one_line_error(export(store, *args, "--hf", str(target)), *fragments)
    _nothing_written(store, target)


def test_a_non_empty_directory_is_refused_unless_overwrite_which_keeps_other_files(store, tmp_path):
    from kernels import get_local_kernel

    target = tmp_path / "out"
    target.mkdir()
    (target / "mine.txt").write_text("not the export's")
    one_line_error(export(store, "k1", "--hf", str(target)), f"{target} exists and is not empty", "--overwrite")
    _nothing_written(store, target)
    assert export(store, "k1", "--hf", str(target), "--overwrite").exit_code == 0
    stale = target / "build" / "torch-cuda" / "stale.py"
    stale.write_text("x = 1\n")   # a file left from an earlier export would fail kernels' digest check
    r = export(store, "k1", "--hf", str(target), "--overwrite", "--name", "softmax-again")
    assert r.exit_code == 0, r.output
    assert not stale.exists() and (target / "mine.txt").read_text() == "not the export's"
    assert not (target / "build" / "torch-cuda" / "softmax_k1").exists()
    k = get_local_kernel(target / "build" / "torch-cuda")
    x = torch.randn(4, 50)
    torch.testing.assert_close(k.softmax(x), torch.softmax(x, dim=-1), atol=1e-6, rtol=1e-4)


def test_a_run_without_a_correct_kernel_and_a_kernel_of_another_run(store, tmp_path):
    engine = open_store(store)
    with Session(engine) as s:
        s.add(Run(id=2, name="r2", problem="softmax", config_json="{}"))
        s.commit()
    engine.dispose()
    one_line_error(export(store, "--run", "r2", "--hf", str(tmp_path / "a")), "run 'r2' has no correct kernel")
    one_line_error(export(store, "k1", "--run", "r2", "--hf", str(tmp_path / "b")), "kernel 1 is not of run 'r2'")
    one_line_error(export(tmp_path / "none.db", "k1", "--hf", str(tmp_path / "c")), "no store at")


def test_force_exports_a_failed_kernel_and_says_so(store, tmp_path):
    out = tmp_path / "forced"
    r = export(store, "k2", "--hf", str(out), "--force")
    assert r.exit_code == 0, r.output
    assert "did not pass its evaluation" in r.stderr
    readme = (out / "README.md").read_text()
    assert "Warning: this kernel did not pass kernelsearch's evaluation" in readme
    assert "status `incorrect`: case odd: max abs err 0.5" in readme and "evaluation: 2 (status `incorrect`" in readme
    meta = json.loads((out / "build" / "torch-cuda" / "metadata.json").read_text())["kernelsearch"]
    assert meta["forced"] is True and meta["status"] == "incorrect" and meta["evaluation_id"] == 2
    con = sqlite3.connect(store)
    assert con.execute("SELECT kernel_id, forced FROM kernelexport").fetchall() == [(2, 1)]
    con.close()


def test_an_old_store_without_the_export_table_is_read_and_gets_it_when_exporting(store, tmp_path):
    con = sqlite3.connect(store)
    con.execute("DROP TABLE kernelexport")   # a store written before the table existed
    con.commit()
    con.close()
    shown = CliRunner().invoke(app, ["show", "k1", "--db", str(store)])   # the read-only views never need it
    assert shown.exit_code == 0, shown.output
    one_line_error(export(store, "k2", "--hf", str(tmp_path / "refused")), "did not pass")
    con = sqlite3.connect(store)   # a refused export changes nothing in the store, not even its tables
    assert not con.execute("SELECT name FROM sqlite_master WHERE name = 'kernelexport'").fetchall()
    con.close()
    r = export(store, "k1", "--hf", str(tmp_path / "out"))
    assert r.exit_code == 0, r.output
    con = sqlite3.connect(store)
    assert con.execute("SELECT kernel_id, evaluation_id FROM kernelexport").fetchall() == [(1, 1)]
    con.close()


def test_names_and_the_function_signature():
    from kernelsearch.export.layout import capability, default_name, op_name
    from kernelsearch.export.triton_layout import forward_params

    assert default_name("softmax", 12) == "softmax-k12"
    assert default_name("/data/level1/23_Softmax.py", 3) == "op-23-softmax-k3"
    assert op_name("/data/level1/23_Softmax.py") == "op_23_softmax" and op_name("flash_attention") == \
        "flash_attention"
    assert capability("NVIDIA H200") == "9.0" and capability("NVIDIA GH200 480GB") == "9.0"
    assert capability("cpu-interpreter") is None and capability(None) is None
    code = "class ModelNew:\n    def forward(self, q, k, v, scale=0.5, *, causal=True):\n        pass\n"
    assert forward_params(code) == ("q, k, v, scale=0.5, *, causal=True", "q, k, v, scale, causal",
                                    "q, k, v, scale, causal=causal")
    code = "D = 2\nclass ModelNew:\n    def forward(self, x, n=D):\n        pass\n"
    assert forward_params(code)[0] == "*args, **kwargs"


def test_cuda_binding_types_and_refusals():
    from kernelsearch.export.cuda_layout import Inline, binding
    from kernelsearch.export.layout import ExportError

    cpp = ("void fill(torch::Tensor& out, const torch::Tensor &x, int n, float s, bool flag);\n"
           "std::vector<torch::Tensor> split(const std::vector<at::Tensor>& xs, int64_t k);\n")
    text, fns = binding(Inline("e", [cpp], ["// kernels"], ["fill", "split"], True))
    assert 'ops.def("fill(Tensor(a!) out, Tensor x, int n, float s, bool flag) -> ()");' in text
    assert "static void ks_op_fill(at::Tensor& out, const at::Tensor& x, int64_t n, double s, bool flag) " \
           "{ fill(out, x, n, s, flag); }" in text
    assert 'ops.def("split(Tensor[] xs, int k) -> Tensor[]");' in text
    assert cpp in text and fns == [("fill", ["out", "x", "n", "s", "flag"]), ("split", ["xs", "k"])]
    with pytest.raises(ExportError, match="parameter type 'c10::complex<float>'"):
        binding(Inline("e", ["torch::Tensor f(c10::complex<float> z);"], ["//"], ["f"], True))
    with pytest.raises(ExportError, match="no C\\+\\+ declaration of g"):
        binding(Inline("e", ["torch::Tensor f(torch::Tensor z);"], ["//"], ["g"], True))


def test_a_cuda_kernel_exports_the_source_layout(store, tmp_path):
    from kernels._rust import Backend, Build

    from kernelsearch.export import export_kernel

    out = tmp_path / "cuda"
    done = export_kernel(store, "k4", out, compile_check=False)
    assert done["language"] == "cuda" and done["evaluation_id"] == 3 and done["compile_check"] is None
    assert Build.open(out).general.backends == [Backend.CUDA]
    toml = (out / "build.toml").read_text()
    assert 'language = "cpp-cuda"' in toml and 'cuda-capabilities = ["9.0"]' in toml   # the H200 it ran on
    cu = (out / "csrc" / "softmax_k4.cu").read_text()
    src = CUDA_KERNEL.split('cuda_src = r"""')[1].split('"""')[0]
    assert cu == "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" + src   # as load_inline
    assert (out / "candidate.py").read_bytes() == CUDA_KERNEL.encode()
    assert 'ops.def("scale(Tensor x, float s) -> Tensor");' in (out / "torch-ext" / "torch_binding.cpp").read_text()
    readme = (out / "README.md").read_text()
    assert "not a build: nothing here was built for any variant" in readme and "evaluation: 3" in readme
    assert "no nvcc compile check was asked for" in readme
    assert not (out / "build").exists()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine: nothing to compile-check with")
def test_a_cuda_export_compiles_with_nvcc(store, tmp_path):
    """About 3 minutes on 2 cores: torch's headers, twice."""
    r = export(store, "k4", "--hf", str(tmp_path / "cuda"))
    assert r.exit_code == 0, r.output
    assert "nvcc compile check passed for sm_90" in r.stdout
    assert "nvcc compile check passed for sm_90" in (tmp_path / "cuda" / "README.md").read_text()


def test_the_entry_point_exports(store, tmp_path):
    p = subprocess.run([sys.executable, "-m", "kernelsearch", "export", "k1", "--hf", str(tmp_path / "o"),
                        "--db", str(store)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "exported k1 (triton, evaluation 1) as softmax-k1" in p.stdout

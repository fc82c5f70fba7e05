"""Loading a KernelBench file: its inputs' dtype learned without drawing them, and the extra shape cases derived
from its module-level sizes (issue 19)."""
from __future__ import annotations

import json
import resource

import pytest
import torch

from kernelsearch.judge.problem import OWN_ONLY, ProblemError, derive_cases, load_file, module_sizes, sized_source
from tests.helpers import ROOT, cli

FIXTURES = ROOT / "tests" / "fixtures" / "problems"


def _file(tmp_path, body: str, name: str = "p.py"):
    path = tmp_path / name
    path.write_text("import torch\nimport torch.nn as nn\n" + body)
    return path


HUGE = """
rows = 1 << 20
cols = 1 << 21


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(rows, cols, dtype=torch.float16)]   # 4 TiB if drawn


def get_init_inputs():
    return []
"""


def test_loading_never_draws_a_huge_input(tmp_path):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    p = load_file(_file(tmp_path, HUGE))
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grew_mb < 500, grew_mb
    own = p.timed_case
    assert (own.name, own.dtype, own.params) == ("own", "float16", {"rows": 1 << 20, "cols": 1 << 21})
    # the interpreter-sized cases are small and odd; the own case is not run on the CPU
    cpu = p.cases_for("cpu")
    assert [c.name for c in cpu] == ["cpu_small", "cpu"] and not own.cpu
    for c in cpu:
        assert all(v % 2 == 1 for v in c.params.values())
        assert c.params["rows"] * c.params["cols"] <= {"cpu_small": 1024, "cpu": 16384}[c.name] * 4
        x, = p.build_inputs(c, seed=3, device="cpu")
        assert tuple(x.shape) == (c.params["rows"], c.params["cols"]) and x.dtype == torch.float16


def test_a_get_inputs_the_meta_device_cannot_run_is_called_for_real(tmp_path):
    p = load_file(_file(tmp_path, """
class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    n = int(torch.randint(5, 6, (1,)).item())   # .item() has no value on the meta device
    return [torch.randn(n, 7, dtype=torch.float64)]


def get_init_inputs():
    return []
"""))
    assert [(c.name, c.dtype) for c in p.cases] == [(OWN_ONLY, "float64")]


def test_get_inputs_that_raises_is_still_one_line(tmp_path):
    path = _file(tmp_path, """
class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    raise RuntimeError("no inputs today")


def get_init_inputs():
    return []
""")
    with pytest.raises(ProblemError, match=r"get_inputs\(\) raised RuntimeError: no inputs today"):
        load_file(path)


def test_sizes_are_module_level_integers_once_assigned():
    src = ("import torch\nbatch_size = 16\ndim = 1000\nreduce_dim = 1\nscale = 2.5\nflag = True\nn: int = 64\n"
           "twice = 32\ntwice = 64\ngrown = 32\ngrown += 1\nshape = (4, 4)\n")
    assert module_sizes(src) == {"batch_size": 16, "dim": 1000, "n": 64}
    out = sized_source(src, {"batch_size": 7, "n": 9})
    ns: dict = {}
    exec(out, ns)   # noqa: S102 - test source
    assert (ns["batch_size"], ns["dim"], ns["n"], ns["reduce_dim"], ns["twice"]) == (7, 1000, 9, 1, 64)


def test_relu_scale_cases_and_the_timed_one_is_its_own():
    p = load_file(FIXTURES / "relu_scale.py")
    assert [(c.name, c.params, c.timed, c.cpu) for c in p.cases] == [
        ("cpu_small", {"batch_size": 5, "dim": 251}, False, True),   # 4 x 250 <= 1024, made odd
        ("cpu", {"batch_size": 17, "dim": 1001}, False, True),
        ("odd", {"batch_size": 9, "dim": 501}, False, False),
        ("own", {"batch_size": 16, "dim": 1000}, True, False)]
    assert p.timed_case.name == "own" and p.cpu_timed_case().name == "cpu"
    for c in p.cases:
        x, = p.build_inputs(c, seed=1, device="cpu")
        assert tuple(x.shape) == (c.params["batch_size"], c.params["dim"])
        assert p.build_init_inputs(c) == [2.5]
    a, = p.build_inputs(p.cases[1], seed=1, device="cpu")
    b, = p.build_inputs(p.cases[1], seed=1, device="cpu")
    c, = p.build_inputs(p.cases[1], seed=2, device="cpu")
    assert torch.equal(a, b) and not torch.equal(a, c)   # drawn from the seed


def test_a_case_the_reference_cannot_run_is_dropped(tmp_path):
    """GroupNorm needs channels divisible by groups: odd sizes of both break it, so only sizes it accepts stay."""
    p = load_file(_file(tmp_path, """
batch_size = 8
channels = 64
groups = 8
hw = 16


class Model(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, hw, hw)]


def get_init_inputs():
    return [channels, groups]
"""))
    for c in p.cases:
        assert c.params["channels"] % c.params["groups"] == 0, c
    assert p.timed_case.name == "own"


def test_no_integer_sizes_keeps_only_its_own_case(tmp_path):
    p = load_file(_file(tmp_path, """
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4, 9)]


def get_init_inputs():
    return []
"""))
    assert [(c.name, c.timed, c.cpu) for c in p.cases] == [(OWN_ONLY, True, True)]
    assert derive_cases(p, "float32")[0].name == OWN_ONLY


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_a_kernel_that_hard_codes_the_shape_fails_a_derived_case(tmp_path):
    good = (FIXTURES / "relu_scale_kernel.py").read_text()
    # right at the file's own size (16 x 1000) and below it; past it, the tail is never written
    hard = good.replace("n = x.numel()", "n = min(x.numel(), 16 * 1000)")
    assert hard != good
    cand = tmp_path / "hard.py"
    cand.write_text(hard)
    r = cli("eval", str(FIXTURES / "relu_scale.py"), str(cand), "--json", "--device", "cpu", "--trials", "1",
            cwd=tmp_path, timeout=300)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["status"] == "incorrect" and out["reason"].startswith("case cpu[batch_size=17,dim=1001"), out


def test_a_module_argument_that_cannot_halve_keeps_its_own_value(tmp_path):
    """MaxPool1d(8, padding=4): halving kernel_size to 4 with padding 4 is refused by torch (padding <= kernel / 2),
    which left such a problem without a CPU case; the sizes get_inputs reads are halved alone then."""
    p = load_file(_file(tmp_path, """
batch_size = 16
features = 32
sequence_length = 8192
kernel_size = 8
padding = 4


class Model(nn.Module):
    def __init__(self, kernel_size, padding):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size, stride=1, padding=padding)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.rand(batch_size, features, sequence_length)]


def get_init_inputs():
    return [kernel_size, padding]
"""))
    cpu = [c for c in p.cases if c.cpu]
    assert [c.name for c in cpu] == ["cpu_small", "cpu"]
    for c in p.cases:
        assert c.params["kernel_size"] == 8 and c.params.get("padding", 4) == 4, c
    assert any(c.params["sequence_length"] % 2 == 1 for c in cpu)   # the input sizes are still shrunk, odd

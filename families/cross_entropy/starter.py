# kernelsearch-space: {"BLOCK": 2048, "SPLIT": 8, "cache_hints": false, "exp2": true, "num_stages": 1, "num_warps": 4, "persistent": false, "programs_per_sm": 4, "variant": "online"}
import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # jit code may only read constexpr globals
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _ce_online_kernel(x_ptr, t_ptr, loss_ptr, n_rows, n_cols, x_stride, ignore_index,
                      BLOCK: tl.constexpr, PERSISTENT: tl.constexpr):
    # One sweep per row, n_cols * size bytes, the floor. Each chunk's max is reduced first and the running sum
    # is rescaled once per chunk (a scalar exp): one exp per logit. (Per-lane running maxima, `online_lanes`,
    # need a second exp per logit for the rescale: 524M extra MUFU ops at the timed size, about 0.1 ms.)
    offs = tl.arange(0, BLOCK)
    step = tl.num_programs(0) if PERSISTENT else n_rows
    for row in range(tl.program_id(0), n_rows, step):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
        m = float("-inf")
        s = 0.0
        for start in tl.range(0, n_cols, BLOCK, num_stages=1):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            s = s * tl.exp2((m - m_new) * LOG2E) + tl.sum(tl.exp2((x - m_new) * LOG2E), axis=0)
            m = m_new
        lse = m + (tl.log2(s) * LN2)

        # the target's logit: one element; an ignored target adds 0 and is not counted (the mean kernel)
        t = tl.load(t_ptr + row)
        valid = t != ignore_index
        x_t = tl.load(x_row + t, mask=valid & (t >= 0) & (t < n_cols), other=0.0).to(tl.float32)
        tl.store(loss_ptr + row, tl.where(valid, lse - x_t, 0.0))

def _launch(x, t, out, n_rows, n_cols, ignore_index):
    loss = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    grid = (min(n_rows, _num_programs(x)),) if False else (n_rows,)
    _ce_online_kernel[grid](x, t, loss, n_rows, n_cols, x.stride(0), ignore_index,
                            BLOCK=2048, PERSISTENT=False, num_warps=4)
    _finish(loss, t, out, n_rows, ignore_index)


@triton.jit
def _ce_mean_kernel(loss_ptr, t_ptr, out_ptr, n_rows, ignore_index, BLOCK: tl.constexpr):
    # One program: the mean of the per-row losses over the targets not ignored (12 bytes a row).
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], tl.float32)
    count = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_rows, BLOCK):
        rows = start + offs
        ok = rows < n_rows
        total += tl.load(loss_ptr + rows, mask=ok, other=0.0)
        t = tl.load(t_ptr + rows, mask=ok, other=ignore_index)
        count += tl.where(ok & (t != ignore_index), 1.0, 0.0)
    tl.store(out_ptr, (tl.sum(total, axis=0) / tl.sum(count, axis=0)).to(out_ptr.dtype.element_ty))


def _finish(loss, t, out, n_rows, ignore_index):
    _ce_mean_kernel[(1,)](loss, t, out, n_rows, ignore_index, BLOCK=1024, num_warps=8)


_SMS = {}


def _num_programs(x):
    # persistent grids: a few programs per SM (the interpreter has no SMs; 4 keeps it quick)
    if x.device.type != "cuda":
        return 4
    idx = x.device.index or 0
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx] * 4


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    if logits.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"cross_entropy kernel: unsupported dtype {logits.dtype}")
    if logits.dim() != 2 or targets.shape != logits.shape[:1]:
        raise ValueError(f"cross_entropy kernel: logits {tuple(logits.shape)} and targets "
                         f"{tuple(targets.shape)}; expected (N, C) and (N,)")
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    targets = targets.contiguous()
    n_rows, n_cols = logits.shape
    out = torch.empty((), dtype=logits.dtype, device=logits.device)
    if n_rows == 0:
        return out.fill_(float("nan"))
    _launch(logits, targets, out, n_rows, n_cols, ignore_index)
    return out


class ModelNew(torch.nn.Module):
    def __init__(self, ignore_index: int = -100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return cross_entropy(logits, targets, self.ignore_index)

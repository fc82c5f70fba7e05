# kernelsearch-space: {"BLOCK": 16384, "ROWS": 1, "SPLIT": 2, "cache_hints": true, "exp2": true, "num_stages": 4, "num_warps": 16, "persistent": true, "programs_per_sm": 1, "stats": "chunk", "variant": "coop"}
import os

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # jit code may only read constexpr globals


@triton.jit
def _softmax_coop_kernel(x_ptr, y_ptr, slot_ptr, n_cols, x_stride, y_stride, slice_len,
                         SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # SPLIT programs share a row, each holding its slice in registers: x is read from memory once even when a
    # row is wider than one program can hold. Each publishes (slice max, slice sum of exp) packed in one 64-bit
    # word with one atomic exchange (the value is its own ready flag: a packed pair is never 0), waits for the
    # others' words, and combines them. The parts of a row are consecutive program ids, so they are dispatched
    # together; a part only waits on parts of its own row.
    pid = tl.program_id(0)
    row = pid // SPLIT
    part = pid % SPLIT
    x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
    y_row = y_ptr + tl.cast(row, tl.int64) * y_stride
    cols = part * slice_len + tl.arange(0, BLOCK)
    mask = (cols < n_cols) & (tl.arange(0, BLOCK) < slice_len)
    x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    s = tl.sum(tl.where(mask, tl.exp2((x - m_safe) * LOG2E), 0.0), axis=0)
    word = (m.to(tl.uint32, bitcast=True).to(tl.uint64) << 32) | s.to(tl.uint32, bitcast=True).to(tl.uint64)
    slots = slot_ptr + tl.cast(row, tl.int64) * SPLIT
    tl.atomic_xchg(slots + part, word.to(tl.int64, bitcast=True), sem="release", scope="gpu")
    parts = tl.arange(0, SPLIT)
    words = tl.atomic_add(slots + parts, 0, sem="acquire", scope="gpu")
    while tl.min(tl.where(words == 0, 0, 1), axis=0) == 0:
        words = tl.atomic_add(slots + parts, 0, sem="acquire", scope="gpu")
    u = words.to(tl.uint64, bitcast=True)
    ms = (u >> 32).to(tl.uint32).to(tl.float32, bitcast=True)
    ss = (u & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True)
    m_row = tl.max(ms, axis=0)
    m_row = tl.where(m_row == float("-inf"), 0.0, m_row)
    s_row = tl.sum(tl.where(ss > 0, ss * tl.exp2((ms - m_row) * LOG2E), 0.0), axis=0)
    y = tl.exp2((x - m_row) * LOG2E) * (1.0 / s_row)
    tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, y, n_rows, n_cols):
    # Triton's interpreter runs programs one after another, so a part would wait forever for the next one:
    # there a row is one part (the same code, the exchange with itself). Compiled, a row is cut into SPLIT
    # parts, more (a power of two) when a part would exceed MAX_PART columns.
    if os.environ.get("TRITON_INTERPRET") == "1":
        split = 1
    else:
        split = triton.next_power_of_2(max(2, triton.cdiv(n_cols, 16384)))
    slice_len = triton.cdiv(n_cols, split)
    block = max(triton.next_power_of_2(slice_len), 16)
    slots = torch.zeros(n_rows * split, dtype=torch.int64, device=x.device)
    _softmax_coop_kernel[(n_rows * split,)](x, y, slots, n_cols, x.stride(0), y.stride(0), slice_len,
                                            SPLIT=split, BLOCK=block, num_warps=16)


_SMS = {}


def _num_programs(x):
    # persistent grids: a few programs per SM (the interpreter has no SMs; 4 keeps it quick)
    if x.device.type != "cuda":
        return 4
    idx = x.device.index or 0
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx] * 4


def softmax(x: torch.Tensor) -> torch.Tensor:
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"softmax kernel: unsupported dtype {x.dtype}")
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows, n_cols = x2.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows and n_cols:
        _launch(x2, y, n_rows, n_cols)
    return y.reshape(shape)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax(x)

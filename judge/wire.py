"""The wire between the judge and a runner process: frames, values, and the two data planes.

A frame is a JSON header plus raw byte buffers (no pickle: the judge never unpickles what a candidate's process
sends, so a reply can carry data, never code). Values (inputs, outputs, weights) are encoded as a small tree:
`{"v": scalar}`, `{"list": [...]}`, `{"tuple": [...]}`, `{"dtype": "float32"}`, `{"t": {...}}` (a tensor whose bytes
travel in the frame) or `{"ipc": {...}}` (a CUDA tensor the judge reads in place, see `IpcReader`). Every decode
checks types, dtypes, shapes, sizes and bounds and raises `WireError` naming what is wrong.

Data planes:
- bytes (CPU, and weights everywhere): tensors travel in the frame.
- CUDA IPC (GPU inputs and outputs): a runner describes a CUDA tensor by the IPC handle of the allocation it lives
  in (driver API, `cuIpcGetMemHandle`), its offset, shape, stride and dtype; the judge maps each allocation once
  (`cuIpcOpenMemHandle`) and reads or writes the tensor in place, without the runner's help. The judge only ever
  maps the runner's memory, never the reverse, so nothing of the judge's is reachable from a candidate.
"""
from __future__ import annotations

import base64
import ctypes
import json
import math
import socket
import struct
import time
from typing import Any

import torch

MAX_HEADER = 64 << 20          # a JSON header larger than this is refused
MAX_DEPTH = 8                  # nesting of lists/tuples in a value
DTYPES = {name: getattr(torch, name) for name in (
    "float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool",
    "float8_e4m3fn", "float8_e5m2", "complex64")}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class WireError(Exception):
    """A frame or value that does not follow the protocol; the message names what is wrong."""


# -- frames -----------------------------------------------------------------------------------------------------

def send(sock: socket.socket, header: dict, buffers: list[bytes | memoryview] = ()) -> None:
    head = json.dumps(header, allow_nan=False).encode()
    parts = [struct.pack("<II", len(head), len(buffers)), head]
    for b in buffers:
        parts.append(struct.pack("<Q", len(b)))
        parts.append(b)
    for p in parts:
        sock.sendall(p)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:   # the whole reply by then, however it is trickled (TimeoutError)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no whole reply by the deadline")
            sock.settimeout(left)
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("the other end closed the connection")
        got += k
    return buf


def recv(sock: socket.socket, max_bytes: int = 1 << 40,
         deadline: float | None = None) -> tuple[dict, list[bytearray]]:
    hlen, nbuf = struct.unpack("<II", _recv_exact(sock, 8, deadline))
    if hlen > MAX_HEADER:
        raise WireError(f"header of {hlen} bytes is over the {MAX_HEADER}-byte cap")
    if nbuf > 1 << 20:
        raise WireError(f"{nbuf} buffers in one frame")
    try:
        header = json.loads(_recv_exact(sock, hlen, deadline))
    except ValueError as err:
        raise WireError(f"header is not JSON: {err}") from None
    if not isinstance(header, dict):
        raise WireError(f"header must be an object, not {type(header).__name__}")
    buffers, total = [], 0
    for _ in range(nbuf):
        (n,) = struct.unpack("<Q", _recv_exact(sock, 8, deadline))
        total += n
        if total > max_bytes:
            raise WireError(f"frame carries over {max_bytes} bytes")
        buffers.append(_recv_exact(sock, n, deadline))
    return header, buffers


# -- values -----------------------------------------------------------------------------------------------------

def _scalar(x: Any) -> dict:
    if isinstance(x, float) and not math.isfinite(x):
        return {"f": repr(x)}
    return {"v": x}


def encode(value: Any, buffers: list, tensor_fn=None) -> dict:
    """Encode `value`; tensors become `tensor_fn(t)` (default: bytes in `buffers`)."""
    if isinstance(value, torch.Tensor):
        if tensor_fn is not None:
            return tensor_fn(value)
        return encode_bytes(value, buffers)
    if isinstance(value, (list, tuple)):
        return {"list" if isinstance(value, list) else "tuple": [encode(v, buffers, tensor_fn) for v in value]}
    if isinstance(value, torch.dtype):
        return {"dtype": DTYPE_NAMES[value]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return _scalar(value)
    raise WireError(f"cannot send a value of type {type(value).__name__}")


def encode_bytes(t: torch.Tensor, buffers: list) -> dict:
    t = t.detach()
    if t.dtype not in DTYPE_NAMES:
        raise WireError(f"tensor dtype {t.dtype} is not supported on the wire")
    host = t.to("cpu").contiguous()
    buffers.append(host.reshape(-1).view(torch.uint8).numpy().tobytes() if host.numel() else b"")   # 0-dim too
    return {"t": {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape), "buf": len(buffers) - 1,
                  "device": t.device.type}}


def _dtype(name: Any) -> torch.dtype:
    if not isinstance(name, str) or name not in DTYPES:
        raise WireError(f"unknown dtype {name!r}")
    return DTYPES[name]


def _shape(shape: Any) -> list[int]:
    if not isinstance(shape, list) or len(shape) > 16 or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise WireError(f"bad shape {shape!r}")
    return shape


def decode(obj: Any, buffers: list, device: str = "cpu", ipc: "IpcReader | None" = None, depth: int = 0) -> Any:
    """Decode a value tree; tensors land on `device` (bytes plane) or are read in place through `ipc`."""
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if not isinstance(obj, dict) or len(obj) != 1:
        raise WireError(f"bad value {str(obj)[:80]!r}")
    (kind, body), = obj.items()
    if kind == "v":
        if body is not None and not isinstance(body, (bool, int, float, str)):
            raise WireError(f"bad scalar {str(body)[:80]!r}")
        return body
    if kind == "f":
        if body not in ("nan", "inf", "-inf"):
            raise WireError(f"bad float {body!r}")
        return float(body)
    if kind in ("list", "tuple"):
        if not isinstance(body, list):
            raise WireError(f"bad {kind}")
        items = [decode(v, buffers, device, ipc, depth + 1) for v in body]
        return items if kind == "list" else tuple(items)
    if kind == "dtype":
        return _dtype(body)
    if kind == "t":
        return decode_bytes(body, buffers, device)
    if kind == "ipc":
        if ipc is None:
            raise WireError("a CUDA IPC tensor where none was expected")
        return ipc.tensor(body)
    raise WireError(f"unknown value kind {kind!r}")


def decode_bytes(body: Any, buffers: list, device: str) -> torch.Tensor:
    if not isinstance(body, dict):
        raise WireError("bad tensor")
    dtype, shape = _dtype(body.get("dtype")), _shape(body.get("shape"))
    i = body.get("buf")
    if not isinstance(i, int) or not 0 <= i < len(buffers):
        raise WireError(f"tensor names buffer {i!r}, the frame has {len(buffers)}")
    raw = buffers[i]
    numel = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(raw) != numel * itemsize:
        raise WireError(f"tensor of shape {shape} {body.get('dtype')} needs {numel * itemsize} bytes, got {len(raw)}")
    if numel == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    raw = raw if isinstance(raw, bytearray) else bytearray(raw)   # torch wants a writable buffer
    t = torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)
    return t.to(device) if device != "cpu" else t.clone()


def flat_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flat_tensors(v)]
    return []


def b64(b: bytes) -> str:
    return base64.b64encode(bytes(b)).decode()


def unb64(s: Any, n: int | None = None) -> bytes:
    if not isinstance(s, str):
        raise WireError("bad base64 field")
    try:
        raw = base64.b64decode(s, validate=True)
    except ValueError as err:
        raise WireError(f"bad base64: {err}") from None
    if n is not None and len(raw) != n:
        raise WireError(f"expected {n} bytes, got {len(raw)}")
    return raw


# -- CUDA IPC (driver API through ctypes) --------------------------------------------------------------------------

class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


_driver = None


def _cu():
    global _driver
    if _driver is None:
        lib = ctypes.CDLL("libcuda.so.1")

        def fn(*names):
            for n in names:
                if hasattr(lib, n):
                    return getattr(lib, n)
            raise WireError(f"the CUDA driver has none of {names}")
        _driver = {
            "get_handle": fn("cuIpcGetMemHandle"),
            "open": fn("cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"),
            "close": fn("cuIpcCloseMemHandle"),
            "range": fn("cuMemGetAddressRange_v2", "cuMemGetAddressRange"),
        }
        _driver["open"].argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
        _driver["get_handle"].argtypes = [ctypes.POINTER(_Handle), ctypes.c_uint64]
        _driver["range"].argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
        _driver["close"].argtypes = [ctypes.c_uint64]
    return _driver


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise WireError(f"{what} failed with CUDA driver error {rc}")


class IpcWriter:
    """The runner's side: describes CUDA tensors by allocation handle + offset (handles sent once each)."""

    def __init__(self) -> None:
        self.sent: dict[bytes, int] = {}   # handle bytes -> segment id

    def describe(self, t: torch.Tensor, new_segments: dict) -> dict:
        if t.dtype not in DTYPE_NAMES:
            raise WireError(f"tensor dtype {t.dtype} is not supported on the wire")
        body = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape), "stride": list(t.stride())}
        if t.numel() == 0:
            return {"ipc": {**body, "seg": -1, "off": 0}}
        cu = _cu()
        ptr = t.data_ptr()
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        _check(cu["range"](ctypes.byref(base), ctypes.byref(size), ptr), "cuMemGetAddressRange")
        h = _Handle()
        _check(cu["get_handle"](ctypes.byref(h), base.value), "cuIpcGetMemHandle")
        key = ctypes.string_at(ctypes.addressof(h), 64)   # all 64 bytes (a c_char field stops at a NUL)
        seg = self.sent.get(key)
        if seg is None:
            seg = self.sent[key] = len(self.sent)
            new_segments[str(seg)] = {"handle": b64(key), "size": size.value}
        return {"ipc": {**body, "seg": seg, "off": ptr - base.value}}


class _Mapped:
    """An allocation of the runner's, mapped into the judge: exposed to torch as a uint8 tensor (no copy)."""

    def __init__(self, ptr: int, size: int):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (size,), "typestr": "|u1", "version": 3}


class IpcReader:
    """The judge's side: maps each of a runner's allocations once and reads (or writes) tensors in place."""

    def __init__(self) -> None:
        self.segments: dict[int, torch.Tensor] = {}
        self.ptrs: list[int] = []

    def add_segments(self, segs: Any) -> None:
        if not isinstance(segs, dict):
            raise WireError("bad segment table")
        if segs:
            torch.empty(1, device="cuda")   # the driver calls below need this process's CUDA context current
        cu = _cu()
        for sid, info in segs.items():
            if not isinstance(info, dict) or not isinstance(info.get("size"), int) or info["size"] <= 0:
                raise WireError(f"bad segment {sid!r}")
            seg = int(sid)
            if seg in self.segments:
                raise WireError(f"segment {seg} sent twice")
            h = _Handle()
            ctypes.memmove(ctypes.addressof(h), unb64(info.get("handle"), 64), 64)
            ptr = ctypes.c_uint64()
            _check(cu["open"](ctypes.byref(ptr), h, 1), "cuIpcOpenMemHandle")   # 1: lazy peer access
            self.ptrs.append(ptr.value)
            self.segments[seg] = torch.as_tensor(_Mapped(ptr.value, info["size"]), device="cuda")

    def tensor(self, body: Any) -> torch.Tensor:
        if not isinstance(body, dict):
            raise WireError("bad ipc tensor")
        dtype, shape = _dtype(body.get("dtype")), _shape(body.get("shape"))
        stride, seg, off = body.get("stride"), body.get("seg"), body.get("off")
        if not isinstance(stride, list) or len(stride) != len(shape) or \
                not all(isinstance(s, int) and s >= 0 for s in stride):
            raise WireError(f"bad stride {stride!r}")
        if math.prod(shape) == 0:
            return torch.empty(shape, dtype=dtype, device="cuda")
        if seg not in self.segments or not isinstance(off, int) or off < 0:
            raise WireError(f"tensor in unknown segment {seg!r} or at a bad offset")
        itemsize = torch.empty((), dtype=dtype).element_size()
        extent = (sum((d - 1) * s for d, s in zip(shape, stride)) + 1) * itemsize
        buf = self.segments[seg]
        if off % itemsize or off + extent > buf.numel():
            raise WireError(f"tensor at offset {off} (+{extent} bytes) outside its segment of {buf.numel()} bytes")
        return buf[off:off + extent].view(dtype).as_strided(shape, stride)

    def close(self) -> None:
        self.segments.clear()
        if self.ptrs:
            cu = _cu()
            for p in self.ptrs:
                cu["close"](p)
            self.ptrs.clear()

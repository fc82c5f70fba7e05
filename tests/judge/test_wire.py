"""The wire between judge and runner: values survive the trip, and anything malformed is a WireError naming what
is wrong (the judge never unpickles, and trusts no size, dtype, shape or offset a runner sends)."""
from __future__ import annotations

import socket
import struct

import pytest
import torch

from kernelsearch.judge import wire
from kernelsearch.judge.harness import io_floor_ms


@pytest.mark.parametrize("value", [
    torch.tensor(3.5), torch.randn(2, 3).bfloat16(), torch.zeros(0, 4), torch.arange(6).reshape(2, 3).t(),
    torch.tensor([True, False]), [torch.ones(2), (3, 4.5, None, "x")], torch.float16, float("nan")])
def test_values_round_trip(value):
    bufs: list = []
    got = wire.decode(wire.encode(value, bufs), bufs)
    if isinstance(value, torch.Tensor):
        assert got.dtype == value.dtype and got.shape == value.shape and torch.equal(got, value.contiguous())
    elif isinstance(value, float):
        assert got != got   # NaN
    elif isinstance(value, list):
        assert torch.equal(got[0], value[0]) and got[1] == value[1]
    else:
        assert got == value


@pytest.mark.parametrize("obj, bufs, words", [
    ({"t": {"dtype": "float32", "shape": [4], "buf": 0}}, [b"\0" * 8], "needs 16 bytes"),
    ({"t": {"dtype": "object", "shape": [1], "buf": 0}}, [b"\0" * 8], "unknown dtype"),
    ({"t": {"dtype": "float32", "shape": [-1], "buf": 0}}, [b""], "bad shape"),
    ({"t": {"dtype": "float32", "shape": [1], "buf": 3}}, [b"\0" * 4], "names buffer 3"),
    ({"pickle": "gASV"}, [], "unknown value kind"),
    ({"v": {"nested": 1}}, [], "bad scalar"),
    ({"ipc": {"dtype": "float32", "shape": [1], "stride": [1], "seg": 0, "off": 0}}, [], "none was expected"),
])
def test_malformed_values_are_refused_by_name(obj, bufs, words):
    with pytest.raises(wire.WireError, match=words):
        wire.decode(obj, bufs)


def test_frames_round_trip_and_oversized_headers_are_refused():
    a, b = socket.socketpair()
    try:
        wire.send(a, {"op": "x", "n": 2}, [b"abc", b""])
        header, bufs = wire.recv(b)
        assert header == {"op": "x", "n": 2} and [bytes(x) for x in bufs] == [b"abc", b""]
        a.sendall(struct.pack("<II", wire.MAX_HEADER + 1, 0))
        with pytest.raises(wire.WireError, match="over the"):
            wire.recv(b)
    finally:
        a.close()
        b.close()


def test_io_floor_is_the_bytes_over_the_copy_bandwidth():
    # 1 GB moved once (0.5 GB read, 0.5 GB written) at 4000 GB/s: 0.25 ms
    assert io_floor_ms(500_000_000, 500_000_000, {"copy_gbps": 4000.0}) == pytest.approx(0.25)
    assert io_floor_ms(1, 1, {}) is None



def test_a_reply_trickled_past_its_deadline_is_a_timeout():
    """A group's candidate has a deadline for each reply (judge/client.py): a runner that sends a byte now and then,
    each within any one receive's wait, is still cut off when the whole reply is not in by the deadline."""
    import threading
    import time

    ours, theirs = socket.socketpair()
    frame = struct.pack("<II", 40, 0) + b" " * 40
    stop = threading.Event()

    def trickle():
        for b in frame:
            if stop.wait(0.2):
                return
            try:
                theirs.send(bytes([b]))
            except OSError:
                return
    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            wire.recv(ours, deadline=t0 + 1.0)
        assert time.monotonic() - t0 < 4.0   # not 48 bytes x 0.2 s (9.6 s)
    finally:
        stop.set()
        ours.close()
        theirs.close()

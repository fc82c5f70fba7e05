"""A runner: the process that holds one model (the candidate's ModelNew, or the reference for timing) and runs it on
the inputs the judge gives it. It is the untrusted side of an evaluation: nothing it says is a verdict.

It serves one judge over one socket (judge/wire.py frames), one request at a time:
  setup {mode, threads, gpu_memory_fraction}         -> {pid, device}
  load {role: candidate, path} | {role: reference, problem}
  build {init, state, dtype, seed}                   the model, its weights sent by the judge (identical on both sides)
  inputs {slot, values} | {sets: [{slot, values}]}  CPU: values as bytes; GPU: {"alloc": spec} -> the runner allocates
                                                     and describes them (IPC), and the judge writes them in place
  warm {slot, last}                                  GPU: the forward with Triton kernels compiled, not launched
                                                     (each with its launcher; the last case closes them); then a
                                                     fresh copy of the candidate's module (no state kept)
  call {slot}                                        -> {out, launches, threads, guard, tf32, inputs (CPU)}
  batch {slots, n}                                   n calls rotating over the slots, outputs kept, device synchronized
  describe {}                                        -> the kept outputs (IPC descriptors or bytes)
  aot {problem}                                      -> the sm_90 compile report (CPU machines)
  exit
Every failure becomes an {"error": {...}} reply with text only; what the candidate raises is never re-raised in the
judge. The launch, thread, identity and precision reports are advisory: they catch honest mistakes and naive
cheats; a candidate that rewrites this process can falsify them, which is why the judge decides from outputs it
reads itself and times with its own clock.

Past 500 lines on purpose: every request above is answered here, in the one process the candidate's code runs in,
so the judge's side of each (conversation.py, clock.py, harness.py) can be read against one file.
"""
from __future__ import annotations

import contextlib
import math
import os
import socket
import sys
import threading
import time
import traceback
import warnings

import torch

from kernelsearch.judge import numerics, wire

MAX_SOURCE_BYTES = 1 << 20
# threads a warm-up compiles the candidate's Triton kernels on (op_warm); 1 (the default): one after another in the
# runner's own thread, as a call would. 4 on an H100 cut the warm-up 1.4-2.3 s an evaluation but not the batch's
# wall time, and rmsnorm's repeat pair read 4.2 % and 3.9 % apart (0.3 % without): 8 evaluations x 4 compile
# threads oversubscribe 16 cores beside another evaluation's timing loop
WARM_THREADS = max(1, int(os.environ.get("KS_CLOCK_WARM_THREADS", "1") or 1))
_SYNC = torch._C._cuda_synchronize if hasattr(torch._C, "_cuda_synchronize") else torch.cuda.synchronize


class _Failure(Exception):
    def __init__(self, stage: str, err: BaseException | str):
        super().__init__(str(err))
        self.stage = stage
        self.err = err


def _describe_exception(err: BaseException) -> dict:
    """Text of any exception, however malformed (a __str__ that raises, odd attributes, a non-str message)."""
    try:
        name = type(err).__name__
        name = name if isinstance(name, str) else "exception"
    except BaseException:  # noqa: BLE001
        name = "exception"
    try:
        text = str(err)
    except BaseException:  # noqa: BLE001
        text = "<the exception could not be printed>"
    try:
        tb = "".join(traceback.format_exception(type(err), err, err.__traceback__, limit=-6))
    except BaseException:  # noqa: BLE001
        tb = ""
    return {"type": name[:100], "text": text[:4000], "tb": tb[-6000:]}


def _guard_targets() -> dict:
    """What the runner itself relies on, and the timing/comparison functions a cheat would reach for."""
    t = {"time.perf_counter": (time, "perf_counter"), "time.perf_counter_ns": (time, "perf_counter_ns"),
         "time.time": (time, "time"), "time.monotonic": (time, "monotonic"),
         "torch.cuda.synchronize": (torch.cuda, "synchronize"), "torch.cuda.Event": (torch.cuda, "Event"),
         "torch.cuda.current_stream": (torch.cuda, "current_stream"),
         "torch.allclose": (torch, "allclose"), "torch.isclose": (torch, "isclose"), "torch.equal": (torch, "equal"),
         "torch.testing.assert_close": (torch.testing, "assert_close"),
         "torch.Tensor.__eq__": (torch.Tensor, "__eq__"), "torch.Tensor.clone": (torch.Tensor, "clone"),
         "torch.Tensor.to": (torch.Tensor, "to"), "torch.Tensor.fill_": (torch.Tensor, "fill_"),
         "threading.active_count": (threading, "active_count"), "socket.socket.sendall": (socket.socket, "sendall")}
    from kernelsearch.judge import correctness

    for mod, names in ((correctness, ("compare", "_compare_values", "flatten")),
                       (numerics, ("references", "normwise_error"))):
        for name in names:
            t[f"{mod.__name__.rsplit('.', 1)[-1]}.{name}"] = (mod, name)
    try:
        from triton.runtime.jit import JITFunction
        t["triton.JITFunction.run"] = (JITFunction, "run")
    except ImportError:
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction
        t["triton.InterpretedFunction.run"] = (InterpretedFunction, "run")
    except ImportError:
        pass
    return t


def _escaped_capture(g, outs, warned: list[str]) -> str | None:
    """Why a captured graph does not do the candidate's work, or None. A kernel launched on the legacy default stream
    (`kernel<<<grid, block, smem>>>`, no stream) runs during the capture and is not recorded in it: torch warns that
    the graph is empty, and a replay writes nothing. Checked both ways: the warning, and the outputs poisoned (NaN)
    and replayed once: a graph that writes none of them is no timing of the candidate."""
    empty = next((w for w in warned if "graph is empty" in w.lower()), None)
    floats = [t for t in wire.flat_tensors(outs) if t.is_floating_point() and t.is_cuda and t.numel()]
    if empty is None and floats:
        for t in floats:
            t.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        if any(not bool(t.isnan().all()) for t in floats):
            return None
    elif empty is None:
        return None
    return ("the CUDA graph captured none of its work (" + (f"torch: {empty[:120]}" if empty else
            "a replay wrote none of its outputs") + "): a kernel launched on the legacy default stream "
            "(kernel<<<grid, block, smem>>> with no stream) escapes capture; timed without a graph, by the batch's "
            "wall clock and a device synchronize, on the stream it uses")


class Runner:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.mode = "cpu"
        self.device = "cpu"
        self.role = None
        self.module = None
        self.module_name = ""
        self.language = None
        self.source = ""
        self.model = None
        self.slots: dict[int, list] = {}
        self.warm_models: dict[int, object] = {}   # the warm-up's model of each slot (op_build `warm_slot`)
        self.kept: list = []
        self.ipc = None
        self.graph = None
        self.launches = None
        self.guard = None
        self.path = ""
        self.warmed = 0   # warm-ups done: each leaves a fresh copy of the candidate's module
        self.compiling = None   # (threads, Triton's AsyncCompileMode) while a warm-up's compiles are open

    # -- plumbing ---------------------------------------------------------------------------------------------
    def reply(self, header: dict, buffers: list | None = None) -> None:
        wire.send(self.sock, header, buffers or [])

    def out_value(self, value, buffers: list, new_segments: dict):
        if self.ipc is not None:
            return wire.encode(value, buffers, lambda t: self._ipc_or_bytes(t, buffers, new_segments))
        return wire.encode(value, buffers)

    def _ipc_or_bytes(self, t: torch.Tensor, buffers: list, new_segments: dict):
        if t.is_cuda:
            return self.ipc.describe(t, new_segments)
        return wire.encode_bytes(t, buffers)

    def sync(self) -> None:
        if self.device == "cuda":
            _SYNC()   # bound at import, before any candidate code: rebinding torch.cuda.synchronize changes nothing

    # -- ops --------------------------------------------------------------------------------------------------
    def op_setup(self, req: dict) -> dict:
        self.mode = req.get("mode", "cpu")
        torch.set_num_threads(int(req.get("threads", 1)))
        if self.mode == "cuda":
            self.device = "cuda"
            torch.cuda.set_per_process_memory_fraction(float(req.get("gpu_memory_fraction", 0.8)), 0)
            self.ipc = wire.IpcWriter()
        numerics.pin_precision()   # as in the judge; a change is reported
        return {"pid": os.getpid(), "device": torch.cuda.get_device_name(0) if self.mode == "cuda" else "cpu"}

    def op_load(self, req: dict) -> dict:
        from kernelsearch.judge.anticheat import Guard, LaunchCounter
        from kernelsearch.judge.problem import load_problem, load_source_module

        self.role = req.get("role")
        if self.role == "reference":
            problem = load_problem(req["problem"])
            self.module = problem.module
            self.cls = self.module.Model
            return {"ok": True}
        path = self.path = req["path"]
        with open(path, "rb") as f:
            raw = f.read(MAX_SOURCE_BYTES + 1)
        if len(raw) > MAX_SOURCE_BYTES:
            raise _Failure("static", f"the candidate source is over the {MAX_SOURCE_BYTES}-byte cap")
        self.source = raw.decode("utf-8", errors="replace")
        self.language = req.get("language")
        if os.environ.get("TRITON_INTERPRET") == "1":
            _autotune_first_config()
        if self.language == "cuda" and req.get("ext_cache"):   # the judge's builds of its extensions (cuda_build.py)
            from kernelsearch.judge.cuda_build import use_builds

            use_builds(req["ext_cache"])
        self.launches = LaunchCounter()
        self.launches.install()
        self.module_name = f"ks_candidate_{os.getpid()}"
        if self.language == "cuda":
            self.launches.install_extensions(self.module_name)
        self.guard = Guard(_guard_targets())
        try:
            self.module = load_source_module(self.source, self.module_name, filename=path)
        except BaseException as err:  # noqa: BLE001
            raise _Failure("compile", err) from None
        if not hasattr(self.module, "ModelNew"):
            raise _Failure("compile", "the candidate defines no ModelNew")
        self.cls = self.module.ModelNew
        return {"ok": True, "guard": self.guard.changed(), "tf32": self._tf32_changed()}

    def _tf32_changed(self) -> bool:
        return not numerics.precision_pinned()

    def op_build(self, req: dict, buffers: list) -> dict:
        init = wire.decode(req["init"], buffers)
        state = {k: wire.decode(v, buffers) for k, v in (req.get("state") or {}).items()}
        self.model = None
        torch.manual_seed(int(req.get("seed", 0)))
        try:
            model = self.cls(*init)
            if state and isinstance(model, torch.nn.Module):
                model.load_state_dict(state, strict=False)
            if isinstance(model, torch.nn.Module):
                model = model.to(self.device)
                if req.get("dtype"):
                    model = model.to(wire.DTYPES[req["dtype"]])
        except BaseException as err:  # noqa: BLE001
            raise _Failure("compile", err) from None
        if req.get("name") == "compile":
            model = torch.compile(model)
        self.model = model
        if req.get("warm_slot") is not None:   # the warm-up's: this model for that slot's forward (op_warm)
            self.warm_models[int(req["warm_slot"])] = model
        self.kept = []
        self.graph = None
        return {"ok": True}

    def op_inputs(self, req: dict, buffers: list) -> tuple[dict, list]:
        """One slot's inputs (`slot`, `values`), or several slots' in one request (`sets`: a list of those), which
        the timing stage's n slots a side take in one round trip instead of n."""
        segs: dict = {}
        if "sets" in req:
            if self.device == "cuda":
                _reserve(req["sets"])
            descs = [self._slot_inputs(int(x["slot"]), x["values"], buffers, segs) for x in req["sets"]]
            return {"sets": descs, "segs": segs}, []
        return {"descs": self._slot_inputs(int(req["slot"]), req["values"], buffers, segs), "segs": segs}, []

    def _slot_inputs(self, slot: int, vals: list, buffers: list, segs: dict) -> list:
        values, descs = [], []
        for v in vals:
            if isinstance(v, dict) and "alloc" in v:   # GPU: the judge writes it in place
                shape, dtype = _spec(v["alloc"])
                t = torch.empty(shape, dtype=dtype, device=self.device)
                values.append(t)
                descs.append(self.ipc.describe(t, segs))
            else:
                values.append(wire.decode(v, buffers, self.device))
                descs.append(None)
        self.slots[slot] = values
        return descs

    def op_call(self, req: dict) -> tuple[dict, list]:
        inputs = self.slots[int(req["slot"])]
        threads = threading.active_count()
        launched = self.launches.launches(self.module_name) if self.launches else 0
        if self.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        try:
            out, written = self._forward_watched(inputs)
        except BaseException as err:  # noqa: BLE001
            raise _Failure("call", err) from None
        info = {"threads": threading.active_count() - threads, **written,
                "launches": (self.launches.launches(self.module_name) - launched) if self.launches else None,
                "kernels": sorted(self.launches.names.get(self.module_name, ())) if self.launches else [],
                "guard": self.guard.changed() if self.guard else [], "tf32": self._tf32_changed(),
                "alias": _aliases(out, inputs),
                "not_plain": [type(o).__name__ for o in wire.flat_tensors(out) if type(o) is not torch.Tensor]}
        if self.device == "cuda":
            info["peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
        buffers, segs = [], {}
        info["out"] = self.out_value(out, buffers, segs)
        if self.device != "cuda":
            info["inputs"] = wire.encode(inputs, buffers)
        info["segs"] = segs
        self.kept = [out]
        return info, buffers

    def _forward_watched(self, inputs: list) -> tuple[object, dict]:
        """The candidate's forward, with the kernel-launch check's record of which storages its Triton kernels took
        (anticheat.Writes): {"untouched": outputs no launch took, "unwritten": outputs its kernels did not write}."""
        from kernelsearch.judge.anticheat import Provenance, Writes

        watch = self.launches is not None and self.language in ("triton", "cuda")
        if watch:
            self.launches.watch = Writes(self.module_name, inputs)
        try:
            with torch.no_grad(), (Provenance(self.launches.watch) if watch else contextlib.nullcontext()):
                out = self.model(*inputs)
            self.sync()
            if not watch:
                return out, {}
            outs = wire.flat_tensors(out)
            untouched, same = self.launches.watch.verdict(outs)
            unwritten = []
            if same:   # the same bytes as before its first kernel: again, with that memory filled first
                self.launches.watch = Writes(self.module_name, inputs, poison=set(same.values()))
                with torch.no_grad():
                    again = wire.flat_tensors(self.model(*inputs))
                self.sync()
                unwritten = [j for j in same if j >= len(again) or not torch.equal(
                    again[j].detach().reshape(-1).view(torch.uint8), outs[j].detach().reshape(-1).view(torch.uint8))]
            return out, {"untouched": untouched if len(untouched) == len(outs) else [], "unwritten": unwritten}
        finally:
            if watch:
                self.launches.watch = None

    def op_warm(self, req: dict) -> dict:
        """The candidate's forward on a slot with its Triton kernels compiled but not launched (GPU), so that the
        compiles, seconds each, happen before the judge takes a lease for the correctness calls rather than inside
        it, where a timing waiting for the device waited on them. Best effort: whatever the forward does with
        outputs that were never computed may fail, and an autotuned kernel stops it; the first real call compiles
        what is left. The judge reads nothing from it but its wall time and counts.

        The judge warms one case after another (`last`: false until the last), each in a slot of its own with the
        model built for it (op_build `warm_slot`: small cases' models and inputs made in one hold). Each case's
        forward submits its kernels' compiles through Triton's AsyncCompileMode, each compile building the kernel's
        launcher too: with KS_CLOCK_WARM_THREADS > 1 to that many threads (the compiler and ptxas leave the GIL), the
        last case waiting for them all; with 1, the default, each at once in this thread."""
        from kernelsearch.judge.anticheat import LaunchCounter
        from kernelsearch.judge.problem import load_source_module

        if self.launches is None or self.device != "cuda":
            return {"warm": False, "why": "no Triton on a GPU here"}
        inputs = self.slots[int(req["slot"])]
        model = self.warm_models.get(int(req["slot"]), self.model)
        t0 = time.perf_counter()
        self._compiles_open()
        self.launches.compile_only = True
        try:
            with torch.no_grad():
                model(*inputs)
            why = None
        except LaunchCounter.Autotuned:
            why = "autotuned kernel"
        except BaseException as err:  # noqa: BLE001 - outputs never computed may make the forward fail: expected
            why = f"{type(err).__name__}"
        finally:
            self.launches.compile_only = False
        self.sync()
        if why is None and req.get("last") is False:   # more cases to come: their compiles join these
            return {"warm": True, "why": None, "wall_s": round(time.perf_counter() - t0, 3)}
        kernels, failed, wait_s = self._compiles_close()
        # A fresh copy of the module, so no state of the warm-up (a table cached from outputs never computed, a flag)
        # reaches a real call; its kernels compile again from the on-disk cache the warm-up filled (milliseconds).
        # the warm-up's models and slots dropped (their blocks stay in this process's cache: op_release says why)
        self.model, self.kept, self.graph, self.warm_models = None, [], None, {}
        self.slots.clear()
        del model, inputs
        self.warmed += 1
        self.module_name = f"ks_candidate_{os.getpid()}_{self.warmed}"
        try:
            self.module = load_source_module(self.source, self.module_name, filename=self.path)
            self.cls = self.module.ModelNew
        except BaseException as err:  # noqa: BLE001 - it loaded once: a second load that fails is the candidate's
            raise _Failure("compile", err) from None
        return {"warm": why is None, "why": why, "wall_s": round(time.perf_counter() - t0, 3), "kernels": kernels,
                "failed": failed, "wait_s": wait_s}

    def _compiles_open(self) -> None:
        """Triton's compiles submitted from here until `_compiles_close`: to a few threads, or with 1 run at once in
        this thread (each kernel's launcher built either way)."""
        if self.compiling is not None:
            return
        from concurrent.futures import ThreadPoolExecutor

        from triton.runtime._async_compile import AsyncCompileMode

        class Warming(AsyncCompileMode):
            def submit(self, key, compile_fn, finalize_fn):
                return super().submit(key, lambda: _with_launcher(compile_fn()), finalize_fn)

        pool = ThreadPoolExecutor(WARM_THREADS, thread_name_prefix="ks-warm") if WARM_THREADS > 1 else _Inline()
        mode = Warming(pool, ignore_errors=True)
        mode.__enter__()
        self.compiling = (pool, mode)

    def _compiles_close(self) -> tuple[int, int, float]:
        """Wait for the submitted compiles (kernels, how many failed, seconds waited); their threads end here, so
        nothing of the warm-up runs in the candidate's process beside a later call. A compile that failed is the
        first real call's to report: it compiles again, in the open."""
        if self.compiling is None:
            return 0, 0, 0.0
        pool, mode = self.compiling
        self.compiling = None
        t0 = time.perf_counter()
        try:
            mode.__exit__(None, None, None)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        failed = sum(1 for f in mode.raw_futures if f.done() and f.exception() is not None)
        return len(mode.raw_futures), failed, round(time.perf_counter() - t0, 3)

    def op_graph(self, req: dict) -> dict:
        """Capture one CUDA graph that runs the model on each of the given slots in order (outputs static), so a
        timed batch is one replay: the kernels back to back, without the host's launch overhead in between."""
        key = tuple(int(x) for x in req["slots"])
        slots = [self.slots[k] for k in key]
        self.graph = None
        if self.device != "cuda":
            return {"graph": False, "why": "no CUDA device"}
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            # warm-up off the default stream, as capture wants: two calls, not one a slot (the slots share their
            # shapes and 512-byte alignment; a KernelBench matmul's 42 slots were 0.1 s a side of the timing stage)
            with torch.cuda.stream(side), torch.no_grad():
                for x in slots[:2]:
                    self.model(*x)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with warnings.catch_warnings(record=True) as caught, torch.cuda.graph(g), torch.no_grad():
                warnings.simplefilter("always")
                outs = [self.model(*x) for x in slots]
            torch.cuda.synchronize()
            escaped = _escaped_capture(g, outs, [str(w.message) for w in caught])
        except BaseException as err:  # noqa: BLE001 - not capturable: timed by an eager loop instead
            with contextlib.suppress(BaseException):
                torch.cuda.synchronize()
            return {"graph": False, "why": _describe_exception(err)["text"][:300]}
        if escaped:   # its kernels ran outside the graph: replays would do nothing; timed by the eager loop instead
            return {"graph": False, "why": escaped, "escaped": True}
        self.graph = (key, g, outs)
        return {"graph": True}

    def op_batch(self, req: dict) -> dict:
        key = tuple(int(s) for s in req["slots"])
        n = int(req["n"])
        model = self.model
        timed = bool(req.get("events")) and self.device == "cuda"
        if timed:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        try:
            if self.graph is not None and self.graph[0] == key and n == len(key):
                self.graph[1].replay()
                self.kept = list(self.graph[2])
            else:
                slots = [self.slots[k] for k in key]
                self.kept = []
                with torch.no_grad():
                    for i in range(n):
                        self.kept.append(model(*slots[i % len(slots)]))
            if timed:
                end.record()
            self.sync()
        except BaseException as err:  # noqa: BLE001
            raise _Failure("call", err) from None
        # events are recorded on every side, so each runner does the same host work around its batch; the judge
        # trusts a reference's (reference code) to tell the wall clock's overhead from the device time, and lets the
        # candidate's (its word) only lower the candidate's credit (judge/charges.batch_credit)
        return {"done": n, "event_ms": start.elapsed_time(end) if timed else None,
                "guard": self.guard.changed() if self.guard else []}

    def op_ping(self, req: dict) -> dict:
        """A one-element device op and a synchronize, just before a timed batch: the GPU switches to this process's
        context here, not inside the batch (a switch cost 0.5-0.8 ms a batch on an H200)."""
        if self.device == "cuda":
            torch.zeros(1, device="cuda").add_(1)
            torch.cuda.synchronize()
        return {"ok": True}

    def op_release(self, req: dict) -> dict:
        """Drop the slots, the kept outputs and the graph (after a reference's warm-up call). Their blocks stay in
        this process's cache, where the timing stage's slots are allocated next, not handed back to the device: the
        judge keeps its mapping of every segment it was sent, and a segment freed and made anew could be read through
        the old one. Returns the bytes cached and unused here, for the judge to count as free when it sizes batches."""
        self.slots.clear()
        self.kept, self.graph = [], None
        if self.device != "cuda":
            return {"cached": 0}
        import gc

        gc.collect()
        return {"cached": int(torch.cuda.memory_reserved() - torch.cuda.memory_allocated())}

    def op_describe(self, req: dict) -> tuple[dict, list]:
        buffers, segs = [], {}
        outs = [self.out_value(o, buffers, segs) for o in self.kept]
        return {"outs": outs, "segs": segs}, buffers

    # -- loop -------------------------------------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            try:
                req, buffers = wire.recv(self.sock)
            except EOFError:
                return
            op = req.get("op")
            try:
                if op == "exit":
                    self.reply({"ok": True})
                    return
                if self.compiling is not None and op not in ("warm", "build", "inputs", "ping"):
                    # a warm-up the judge did not finish: its compiles end before anything else runs here
                    self._compiles_close()
                handler = getattr(self, f"op_{op}", None)
                if handler is None:
                    raise _Failure("protocol", f"unknown op {op!r}")
                res = handler(req, buffers) if op in ("build", "inputs") else handler(req)
                header, bufs = res if isinstance(res, tuple) else (res, [])
                self.reply(header, bufs)
            except _Failure as f:
                err = f.err if isinstance(f.err, BaseException) else None
                desc = _describe_exception(err) if err is not None else {"type": "", "text": str(f.err), "tb": ""}
                self.reply({"error": {"stage": f.stage, **desc}})
            except BaseException as err:  # noqa: BLE001 - anything else is this op's failure, reported as text
                self.reply({"error": {"stage": op or "protocol", **_describe_exception(err)}})


class _Inline:
    """An executor that runs what it is given at once, in the caller's thread (a warm-up with one thread)."""

    def submit(self, fn, *args, **kwargs):
        from concurrent.futures import Future

        done = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as err:  # noqa: BLE001 - kept in the future, as a thread pool would
            done.set_exception(err)
        return done

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def _with_launcher(kernel):
    """A compiled kernel, its launcher built too: Triton's C stub for the kernel's signature, compiled with gcc into
    the runner's cache (half a second) at the kernel's first launch otherwise, which is the first correctness call,
    inside a shared lease. Built here, in a warm-up thread, the first call only loads it. Nothing reaches the
    device: the kernel's binary is loaded at its first launch, as before. Best effort."""
    try:
        from triton.runtime.driver import driver

        driver.active.launcher_cls(kernel.src, kernel.metadata)
    except Exception:  # noqa: BLE001 - the first launch builds it again and reports what fails
        pass
    return kernel


def _autotune_first_config() -> None:
    """Under Triton's interpreter (the CPU machines) @triton.autotune cannot benchmark its configs ("0 active
    drivers"): every autotuned candidate, as models usually write Triton, crashed there. Its benchmark is replaced,
    before the candidate loads, by one that ranks the configs in the order they were written and runs nothing, so
    the first config (the first left after pruning) is the one run and checked. Timings under the interpreter rank
    nothing a GPU would, so nothing of a search is lost; on a GPU autotuning runs as written."""
    from triton.runtime.autotuner import Autotuner

    def first_wins(self, *args, config, **meta):
        return [float(self.configs.index(config)) if config in self.configs else float("inf")] * 3

    Autotuner._bench = first_wins


def _spec(alloc: dict) -> tuple:
    """An input's (shape, dtype) as the judge asked for it to be allocated."""
    return wire._shape(alloc.get("shape")), wire._dtype(alloc.get("dtype"))


def _reserve(sets: list) -> None:
    """Room for every slot's inputs of `sets` as one block, allocated and freed at once: the slots are then cut from
    it by torch's caching allocator (each input's bytes rounded to 512), not each its own cudaMalloc'd segment, so
    the judge maps one IPC segment a side, not one a slot (H100, 2026-12-08: about 0.2 ms a mapping, read from the
    first describes' 256 output mappings of rmsnorm in 0.05 s; rmsnorm's timing stage has 128 slots a side). Only
    where the device has room for the block beside this process's cached free blocks, which the slots would
    otherwise reuse first and the judge counted as free when it sized the batch (a reference's first call's memory).
    The slots' places in the block are regular (anticheat.md: a batch computed at once)."""
    specs = [_spec(v["alloc"]) for x in sets for v in x["values"] if isinstance(v, dict) and "alloc" in v]
    total = sum(-(-math.prod(s) * d.itemsize // 512) * 512 for s, d in specs)
    if torch.cuda.mem_get_info()[0] >= total + torch.cuda.memory_reserved() - torch.cuda.memory_allocated():
        torch.empty(total, dtype=torch.uint8, device="cuda")


def _aliases(out, inputs: list) -> list[int]:
    ptrs = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor) and t.numel()}
    hits = []
    for j, o in enumerate(wire.flat_tensors(out)):
        try:
            if o.numel() and o.untyped_storage().data_ptr() in ptrs:
                hits.append(j)
        except Exception:  # noqa: BLE001 - a tensor without storage is refused by the judge's comparison
            continue
    return hits


def serve_fd(fd: int) -> None:
    """Serve the judge on the connected socket `fd`, then leave without the interpreter's teardown (a
    candidate's atexit or __del__ changes nothing)."""
    from kernelsearch.judge.isolation import become_subreaper

    become_subreaper()   # before any candidate code: a daemon it double-forks stays this runner's descendant
    sock = socket.socket(fileno=fd)
    try:
        Runner(sock).serve()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def main() -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    serve_fd(int(sys.argv[1]))


if __name__ == "__main__":
    main()

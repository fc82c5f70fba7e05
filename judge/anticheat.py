"""Run-time anti-cheat pieces used in the candidate's runner.

The judge decides from outputs it reads itself and times with its own clock (judge/harness.py, clock.py);
what is here runs in the candidate's process and is advisory there (docs/anticheat.md): `LaunchCounter` counts
launches of the candidate's own Triton kernels (the kernel-launch check), `Guard` reports objects the candidate
replaced (the identity check). The static scan of the source is judge/scan/; the problem-level variance check
(check 12), which runs before a search in the command's own process and never meets a candidate, is
kernelsearch/problem_check.py.
"""
from __future__ import annotations

import torch


class LaunchCounter:
    """Counts launches of Triton kernels defined in the candidate module (wraps JITFunction.run and the
    interpreter's InterpretedFunction.run). Installed before the candidate is loaded."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.names: dict[str, set[str]] = {}   # module -> the kernels of it launched (the sm_90 check's list)
        self.wrapped: dict[type, object] = {}
        self.compile_only = False   # the runner's `warm`: Triton kernels are compiled, not launched
        self.watch: Writes | None = None   # a correctness call: which storages its kernels took, and when

    class Autotuned(Exception):
        """An autotuned kernel met in compile-only mode: its configs are chosen by launching them, so the warm-up
        stops there (its compile happens in the first real call)."""

    def install(self) -> None:
        classes = []
        try:
            from triton.runtime.jit import JITFunction
            classes.append(JITFunction)
        except ImportError:
            pass
        try:
            from triton.runtime.interpreter import InterpretedFunction
            classes.append(InterpretedFunction)
        except ImportError:
            pass
        counts, counter = self.counts, self
        for cls in classes:
            if cls in self.wrapped or "run" not in cls.__dict__:
                continue
            original = cls.__dict__["run"]

            def run(self, *args, _original=original, **kwargs):
                if counter.compile_only and not kwargs.get("warmup", False):
                    kwargs["warmup"] = True
                    return _original(self, *args, **kwargs)
                if not kwargs.get("warmup", False):
                    mod = getattr(getattr(self, "fn", None), "__module__", None) or "?"
                    counts[mod] = counts.get(mod, 0) + 1
                    counter.names.setdefault(mod, set()).add(getattr(self.fn, "__name__", "?"))
                    if counter.watch is not None and mod == counter.watch.module:
                        counter.watch.before_launch(getattr(self.fn, "__name__", "?"), args, kwargs)
                return _original(self, *args, **kwargs)

            run.__ks_launch_counter__ = True
            cls.run = run
            self.wrapped[cls] = run
        try:
            from triton.runtime.autotuner import Autotuner
        except ImportError:
            return
        if "run" in Autotuner.__dict__ and Autotuner not in self.wrapped:
            tuned = Autotuner.__dict__["run"]

            def tuned_run(self, *args, _original=tuned, **kwargs):
                if counter.compile_only:
                    raise LaunchCounter.Autotuned()
                return _original(self, *args, **kwargs)

            Autotuner.run = tuned_run
            self.wrapped[Autotuner] = tuned_run

    def launches(self, module_name: str) -> int:
        return self.counts.get(module_name, 0)

    def install_extensions(self, module_name: str) -> None:
        """CUDA C++: each call of a function of an extension load_inline builds counts as a launch of the candidate's
        own kernels (`module_name`'s), its tensor arguments are taken as a Triton launch's are, and the tensors it
        returns (an output allocated in C++) are its work. The native-code scan stands against ATen compute inside."""
        from torch.utils import cpp_extension as ce

        original, counter = ce.load_inline, self

        def load_inline(*args, **kwargs):
            return _CountedExtension(original(*args, **kwargs), counter, module_name)

        load_inline.__wrapped__ = original
        ce.load_inline = load_inline


class _CountedExtension:
    """A load_inline extension whose functions are counted as the candidate's launches (LaunchCounter)."""

    def __init__(self, module, counter: LaunchCounter, owner: str) -> None:
        self.__dict__.update(_module=module, _counter=counter, _owner=owner)

    def __getattr__(self, name: str):
        attr = getattr(self._module, name)
        if name.startswith("__") or not callable(attr):
            return attr
        counter, owner = self._counter, self._owner

        def call(*args, **kwargs):
            counter.counts[owner] = counter.counts.get(owner, 0) + 1
            watch = counter.watch
            if watch is not None and watch.module == owner:
                watch.before_launch(name, args, kwargs)
            out = attr(*args, **kwargs)
            if watch is not None and watch.module == owner:
                watch.derived.update(t.untyped_storage().data_ptr() for t in _launch_tensors(out) if t.numel())
            return out

        return call


def _storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """The whole storage under `t` as a uint8 tensor (a view: no copy)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _fingerprint(t: torch.Tensor) -> int:
    """The wrapping integer sum of the storage under `t`: equal bytes always give an equal sum, and unequal bytes
    almost never do (where they do, the runner's second pass, which fills the memory first, still decides). A sum,
    not a copy: a copy of every output a kernel takes held gigabytes more of the candidate's memory on KernelBench's
    largest problems."""
    b = _storage_bytes(t)
    return int((b.view(torch.int64) if b.numel() % 8 == 0 else b).sum(dtype=torch.int64))


class Writes:
    """Which storages a correctness call's Triton launches took, for the kernel-launch check's second half: the
    candidate's own kernels must have written its output (a launch that touches no output byte does not count).

    Each storage a launch takes that is not an input's is fingerprinted as it was just before the first launch that
    took it (`first`), and torch operations on those storages mark what they return as made from the kernels' work
    (`derived`: a host-side cast, slice or reshape of a kernel's output, through the `Provenance` mode). After the
    forward, an output neither taken by a launch nor made from one was not the candidate's kernels' work
    (`untouched`); an output whose bytes match the fingerprint was already what it is before any of its kernels ran: the
    work was done some other way, unless the memory simply held the same answer from an earlier call. The runner
    then calls the forward again with that storage filled with 0xff just before the same launch (`poison`): a kernel
    that writes it restores the answer; a kernel that does not leaves the fill, and the output is `unwritten`."""

    def __init__(self, module: str, inputs: list, poison: set | None = None) -> None:
        self.module = module
        self.inputs = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor) and t.numel()}
        self.first: dict[int, tuple[tuple, int]] = {}   # storage -> ((kernel, nth, arg), fingerprint before)
        self.derived: set[int] = set()                             # storages torch made from the kernels' work
        self.nth: dict[str, int] = {}
        self.poison = poison or set()

    def from_kernels(self, t) -> bool:
        if not isinstance(t, torch.Tensor) or not t.numel():
            return False
        ptr = t.untyped_storage().data_ptr()
        return ptr in self.first or ptr in self.derived

    def before_launch(self, kernel: str, args: tuple, kwargs: dict) -> None:
        n = self.nth[kernel] = self.nth.get(kernel, -1) + 1
        for key, a in [(k, t) for k, v in [*enumerate(args), *kwargs.items()] for t in _launch_tensors(v)]:
            if not a.numel():
                continue
            ptr = a.untyped_storage().data_ptr()
            if ptr in self.inputs or ptr in self.first:
                continue
            where = (kernel, n, key)
            if where in self.poison:
                _storage_bytes(a).fill_(255)
            self.first[ptr] = (where, _fingerprint(a))

    def verdict(self, outs: list) -> tuple[list[int], dict[int, tuple]]:
        """(outputs neither a launch took nor made from one, {output: where} for outputs that were already their final
        bytes before their first kernel ran)."""
        untouched, same = [], {}
        for j, o in enumerate(outs):
            if not isinstance(o, torch.Tensor) or not o.numel():
                continue
            ptr = o.untyped_storage().data_ptr()
            hit = self.first.get(ptr)
            if hit is None:
                if ptr not in self.derived:
                    untouched.append(j)
            elif _fingerprint(o) == hit[1]:
                same[j] = hit[0]
        return untouched, same


def _launch_tensors(value, depth: int = 0) -> list:
    """The tensors a value hands a kernel or a torch operation: a tensor, the tensor under a TMA descriptor (Triton's
    TensorDescriptor, whose `base` the kernel reads and writes through), or those in a tuple, list or dict of them."""
    if isinstance(value, torch.Tensor):
        return [value]
    base = getattr(value, "base", None)
    if isinstance(base, torch.Tensor) and hasattr(value, "block_shape"):
        return [base]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)) and depth < 4:
        return [t for v in value for t in _launch_tensors(v, depth + 1)]
    return []


class Provenance(torch.overrides.TorchFunctionMode):
    """While a watched forward runs: what a torch operation returns from a tensor the candidate's kernels took (or
    one made from such a tensor) is marked made from the kernels' work (`Writes.derived`)."""

    def __init__(self, writes: Writes) -> None:
        super().__init__()
        self.writes = writes

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if any(self.writes.from_kernels(t) for t in _launch_tensors((args, kwargs))):
            for t in _launch_tensors(out):
                if t.numel():
                    self.writes.derived.add(t.untyped_storage().data_ptr())
        return out


class Guard:
    """Identity check: the objects in `targets` (name -> (owner, attribute)), captured when the guard is made, must
    be the very same objects later. The runner guards what it relies on and the timing and comparison functions a
    cheat would reach for; advisory there (the judge, in another process, relies on none of them)."""

    def __init__(self, targets: dict) -> None:
        self.targets = dict(targets)
        self.ids = {k: _identity(owner, attr) for k, (owner, attr) in self.targets.items()}

    def changed(self) -> list[str]:
        return [k for k, (owner, attr) in self.targets.items() if _identity(owner, attr) != self.ids[k]]


def _identity(owner, attr):
    obj = owner.__dict__.get(attr, getattr(owner, attr, None)) if hasattr(owner, "__dict__") else getattr(owner, attr)
    return id(obj), obj

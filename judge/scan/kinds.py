"""The kinds of value the scan resolves a name or an expression in host code to (`Kind`, tagged by `Tag`).

A name bound several times has the union of the kinds of its bindings, so the scan works with frozensets of kinds.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Tag(enum.Enum):
    """What a value is, as far as one file tells (`Kind.name` is what it names):

    TORCH     a path in torch, resolved against the real torch module: torch.softmax, F.softmax (from
              `import torch.nn.functional as F`), `_f` after `from torch import softmax as _f`
    TOBJ      an instance of a torch class: nn.Linear(...) -> Kind(TOBJ, "torch.nn.Linear")
    TATTR     an attribute (`Kind.attr`) of such an instance: self.lin.weight, self.lin.forward
    TENSOR    a tensor: forward's parameters, what a torch allocation or a tensor method returns, a subscript of a
              tensor, the arguments the candidate's own functions are called with
    OWN, OWNCLASS, OWNFUNC, KERNEL   an instance of the candidate's own class, the class, its own function (by
              qualified name; a lambda), its own Triton kernel
    EXT       a load_inline extension (its functions are the candidate's own)
    MOD       a path in a module that is not torch (math, triton, tl, os)
    BUILTIN   a builtin of Python (len, getattr, eval)
    PLAIN     literals, numbers, shapes (x.shape, x.size(), x.dtype, x.numel())
    SEQ       a container whose elements are of the kinds `Kind.elems` (a list of modules, a tuple of tensors)
    UNKNOWN   anything else (a parameter of a helper never called here, what an unknown call returns)
    """

    TORCH = "torch"
    TOBJ = "tobj"
    TATTR = "tattr"
    TENSOR = "tensor"
    OWN = "own"
    OWNCLASS = "ownclass"
    OWNFUNC = "ownfunc"
    KERNEL = "kernel"
    EXT = "ext"
    MOD = "mod"
    BUILTIN = "builtin"
    PLAIN = "plain"
    SEQ = "seq"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Kind:
    """One kind of value: its tag and what it names (a torch or module path, a class, a function, a builtin)."""

    tag: Tag
    name: str = ""
    attr: str = ""                          # TATTR: the attribute of the instance of torch class `name`
    elems: frozenset[Kind] = frozenset()    # SEQ: the kinds of the elements

    @property
    def tensorish(self) -> bool:
        """A tensor, or an attribute of a torch object (a weight, a buffer): arithmetic on it is torch compute."""
        return self.tag in (Tag.TENSOR, Tag.TATTR)


PLAIN = Kind(Tag.PLAIN)
UNKNOWN = Kind(Tag.UNKNOWN)
TENSOR = Kind(Tag.TENSOR)
KERNEL = Kind(Tag.KERNEL)
EXT = Kind(Tag.EXT)

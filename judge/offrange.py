"""The judge's checks on inputs its problem's generator never draws: the signed-input case and the range cases.

A kernel is judged on the values the generator draws, and can be right only there: an identity passes as ReLU on
`torch.rand`, a softmax without the max subtraction is exact on `randn * 3` (fixture round3/no_max_softmax). These
checks run the smallest case once more on inputs built by judge/variants.py (signed, scaled x10 and x100, shifted
away from zero, constant rows), compare with the reference where it stays finite there, and record in the
evaluation's detail which ran (`signed`, `range`). A problem file gets them; a built-in family's own stability inputs
(large, tiny, mixed, equal) do the same for it. The Judge (harness.py) inherits these methods.
"""
from __future__ import annotations

import dataclasses

from kernelsearch.judge.family import Case
from kernelsearch.judge.numerics import NATIVE, normwise_error, references
from kernelsearch.judge.seeds import derive_seed
from kernelsearch.judge.status import CandidateFailure, Status
from kernelsearch.judge.variants import SIGNED_SCALE, all_finite, range_variants, signed_inputs


class OffRangeChecks:
    """Mixed into the Judge: uses its problem, talk, mem, secret, device, cand, detail, _call and _judge_values."""

    def _signed_check(self, case: Case) -> None:
        """The smallest case once more with every one-signed floating input given random signs and 4x its magnitude
        (judge/variants.py): a kernel must compute the reference's function, not only on the values the
        problem's generator draws. Skipped, and said in the detail, where no input is one-signed or the reference
        is not finite there."""
        seed = derive_seed(self.secret, case.name, "signed")
        ref = self.talk.build(case, seed, "correctness", [(self.cand, "eager")])
        self.mem.doing = f"building the signed-input case of {case.describe()}"
        drawn = signed_inputs(self.problem.build_inputs(case, seed, self.device), derive_seed(seed, "signs"))
        if drawn is None:
            self.detail["signed"] = {"case": case.describe(), "run": False, "why": "no input is all of one sign"}
            return
        inputs, changed = drawn
        which = ", ".join(str(i) for i in changed)
        self.detail["signed"] = entry = {"case": case.describe()}
        self._variant_check(case, ref, inputs, "signed", "signed-input case", f"input(s) {which} given random signs "
                            f"and {SIGNED_SCALE:g}x their magnitude: the problem draws them all of one sign", entry,
                            "the reference is not finite on signed inputs")
        if entry["run"]:
            entry["inputs"] = changed

    def _range_checks(self, case: Case) -> None:
        """The smallest case again with its floating inputs scaled up (x10, x100), shifted away from zero and made of
        constant rows (judge/variants.py `range_variants`): a kernel must compute the reference's function past the
        magnitudes the problem's generator draws. Each runs where the reference stays finite; the detail's `range`
        lists each with whether it ran and how it compared."""
        seed = derive_seed(self.secret, case.name, "range")
        ref = self.talk.build(case, seed, "correctness", [(self.cand, "eager")])
        self.mem.doing = f"building the range cases of {case.describe()}"
        base = self.problem.build_inputs(case, seed, self.device)
        ran = self.detail.setdefault("range", {"case": case.describe(), "cases": {}})["cases"]
        for name, inputs, why in range_variants(base, derive_seed(seed, "rows")):
            ran[name] = {"run": False, "why": why}
            if inputs is not None:
                self._variant_check(case, ref, inputs, name, f"range case {name}", "the inputs past the problem "
                                    "generator's range", ran[name], "the reference is not finite there")

    def _variant_check(self, case: Case, ref, inputs: list, tag: str, what: str, how: str, entry: dict,
                       not_finite: str) -> None:
        """One call on inputs the generator never draws, compared with the reference where it is finite there
        (`not_finite` in `entry` where it is not); `entry` (the detail's) says how it compared, and a mismatch is
        `incorrect`, naming `what` and `how` the inputs were made."""
        plan = self.mem.plan(self.problem, case, ref, inputs)
        views = self.talk.put(self.cand, 0, inputs, "correctness")
        got = self._call(0, inputs, views, f"ModelNew.forward ({what})")
        self.mem.doing = f"computing the reference of the {what} of {case.describe()}"
        want, want_hi = references(ref, inputs, plan.hi or NATIVE)
        if not all_finite(want_hi) or not all_finite(want):
            entry.update(run=False, why=not_finite)
            return
        atol, rtol = self.problem.tolerance(case)
        cmp = self._judge_values(dataclasses.replace(case, name=f"{case.name}+{tag}"), got, want, want_hi, atol, rtol,
                                 plan.chunk)
        normwise = None
        if not cmp.ok and "values off by more than" in cmp.reason:
            # signed or far-from-zero values make sums cancel: a running sum near zero after a long history is off
            # by eps x that history, not by rtol x its value (an honest fp32 cumsum fails elementwise where eager
            # accumulates in float64, as torch does on the CPU); these cases are there for sign and range, so they
            # are judged normwise, where overflow, NaN or a lost accumulator still fails
            normwise = normwise_error(got, want_hi)
            if normwise <= rtol:
                cmp.ok = True
            else:
                cmp.reason += f"; normwise error {normwise:.3g} is over rtol {rtol:g} too"
        entry.pop("why", None)
        entry.update(run=True, ok=cmp.ok, max_abs=cmp.max_abs, max_rel=cmp.max_rel,
                     **({"normwise": normwise} if normwise is not None else {}))
        if not cmp.ok:
            raise CandidateFailure(Status.incorrect, f"{what} {case.describe()}: {cmp.reason} ({how}, and a kernel "
                                   "must compute the reference's function beyond the values its generator draws)",
                                   cmp.detail or None, stage="correctness")

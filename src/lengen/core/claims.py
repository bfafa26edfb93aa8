"""The claims report's plain value types (a claim, a measurement, a "not testable" answer) and
the two numbers shared below the report: NEAR_PERFECT (the figures draw it) and THEORY_DELTA (the
theory's cases compute it). The claims themselves are lengen.report.claims."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

NEAR_PERFECT = 0.9  # "near-perfect" accuracy  # (the report's rules; a task's claims use it too)

# Theorem 4.3 is checked on a positive case with delta > 0 (lengen.analysis.theory_cases computes
# it as the table case "positive, delta=1e-07"; the report's TH-4.3 row reads that case)
THEORY_DELTA = 1e-7


@dataclass(frozen=True)
class NotTestable:
    """A measure's answer when the comparison it makes would show nothing: e.g. a length-
    generalization comparison between models that did not learn the task in distribution."""

    reason: str


@dataclass(frozen=True)
class RunOutcome:
    """One training run against a rule "every effect >= threshold": its worst value over the
    cells the rule names (its own accuracy, or its gap to the paired run), and whether it
    passes (lengen.report.effects.run_outcomes)."""

    run: str
    value: float
    passed: bool  # not shown below the threshold in any cell, its test-set noise accounted for
    group: str = ""  # the model group the sentence quantifies over (e.g. "K_train 8")
    observed: bool | None = None  # its worst observed value clears the threshold (the old rule)


@dataclass(frozen=True)
class GroupShare:
    """One model group's runs that pass, and the exact 95% interval on its share."""

    group: str
    passed: int
    runs: int
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.passed} of {self.runs} pass [{self.low:.2f}-{self.high:.2f}]"


@dataclass(frozen=True)
class ArmTest:
    """A comparison of two arms on their runs' generalize / fail counts: the arm the paper says
    generalizes better, the worse one, each (runs that generalize, runs), and Boschloo's one-
    sided p (lengen.report.effects.judge_arms)."""

    name: str
    group: str
    better: tuple[int, int]
    worse: tuple[int, int]
    p: float

    def __str__(self) -> str:
        return (
            f"{self.name}: {self.better[0]} of {self.better[1]} vs {self.worse[0]} of "
            f"{self.worse[1]} runs generalize, Boschloo p = {self.p:.3g}"
        )


@dataclass(frozen=True)
class Measured:
    """A measurement made of several named numbers (an estimate and its 95% CI, or a slope and a
    spread), shown together; a rule reads them by name."""

    values: dict[str, float]
    detail: str = ""  # shown after the row's "measured as" (e.g. every effect behind the number)
    # a run-level measurement: the fewest runs in a compared arm of the effect it is judged on
    # (None: not made of training runs, e.g. the theory's exact risks)
    runs: int | None = None
    more: str = ""  # what more evidence would decide it (lengen.report.effects.more_evidence)
    # each run's outcome, when the row is judged on its runs (lengen.report.effects.judge_runs)
    outcomes: tuple[RunOutcome, ...] = ()
    # each model group's share of runs that pass, with its exact interval
    groups: tuple[GroupShare, ...] = ()
    # a sentence comparing arms: each comparison's generalize / fail counts and Boschloo's p
    # (lengen.report.effects.judge_arms decides the row on them; `outcomes` are shown beside)
    arms: tuple[ArmTest, ...] = ()
    # why the measured row is shown but not counted, when that depends on the data (e.g. a
    # claim beyond the paper whose test cannot discriminate); "" : as its claim says
    uncounted: str = ""

    def __getitem__(self, name: str) -> float:
        return self.values[name]

    @staticmethod
    def ci_keys(name: str) -> tuple[str, str]:
        """The keys of a number's CI: ci_low / ci_high for `estimate`, NAME_ci_low /
        NAME_ci_high for the others."""
        return (
            ("ci_low", "ci_high") if name == "estimate" else (f"{name}_ci_low", f"{name}_ci_high")
        )

    def runs_text(self) -> str:
        """The runs' outcomes in brief, per group: "2 of 3 runs pass; depth 2: 2 of 3 pass
        [0.09-0.99]: 0.91, 0.88, 0.31x" (each run's worst value, x where it fails; the exact
        95% interval on each group's share, never pooled over groups)."""
        k, n = sum(o.passed for o in self.outcomes), len(self.outcomes)
        values: dict[str, list[str]] = {}
        for o in self.outcomes:
            values.setdefault(o.group, []).append(f"{o.value:.2f}{'' if o.passed else 'x'}")
        share = {g.group: f"{g}: " for g in self.groups}
        text = "; ".join(
            f"{g + ': ' if g else ''}{share.get(g, '')}{', '.join(v)}" for g, v in values.items()
        )
        arms = "; ".join(map(str, self.arms))
        return f"{k} of {n} run{'s' if n != 1 else ''} pass (x: fails); {text}" + (
            f"; between the arms: {arms}" if arms else ""
        )

    def __str__(self) -> str:
        """'name value [CI low, CI high]' per number (CI keys: ci_low / ci_high for `estimate`,
        NAME_ci_low / NAME_ci_high for the others); a row judged on its runs: its lowest run
        mean and how many runs pass (runs_text has each run)."""
        if self.outcomes:  # in brief: the row's details hold runs_text
            k, n = sum(o.passed for o in self.outcomes), len(self.outcomes)
            arms = (
                f"; {sum(t.better[0] for t in self.arms)} vs "
                f"{sum(t.worse[0] for t in self.arms)} runs generalize over "
                f"{len(self.arms)} comparison{'s' if len(self.arms) != 1 else ''}, largest "
                f"Boschloo p {max(t.p for t in self.arms):.3g}"
                if self.arms
                else ""
            )
            return (
                f"lowest cell's run mean {self.values['estimate']:.3f}; {k} of {n} run"
                f"{'s' if n != 1 else ''} pass{arms}"
            )
        parts = []
        for k, v in self.values.items():
            if k.endswith(("ci_low", "ci_high")):
                continue
            lo, hi = self.ci_keys(k)
            ci = f" [{self.values[lo]:.3f}, {self.values[hi]:.3f}]" if lo in self.values else ""
            parts.append(f"{k} {v:.3f}{ci}")
        if self.runs is not None:
            parts.append(f"{self.runs} run{'s' if self.runs != 1 else ''} per arm")
        return ", ".join(parts)


@dataclass
class Claim:
    """A claim, how it is measured, and the rule that turns the measurement into a verdict."""

    id: str
    section: str
    paper: str  # the paper's statement or number
    measured_as: str  # what the number is
    measure: Callable[[object], float | Measured | NotTestable | None]
    rule: str  # the rule, in words
    # the rule as code, for a measurement without a run-level CI (None: `threshold` judges it)
    holds: Callable[[float | Measured], bool] | None = None
    # a rule "the whole CI >= threshold" on a run-level measurement: the report judges it
    # (reproduced / inconclusive / not reproduced / underpowered, lengen.report.effects.judge)
    threshold: float | None = None
    # "paper": a claim of the paper; "check": cannot fail by construction (a sanity check, not a
    # reproduction); "beyond": a claim beyond the paper (another paper's prediction, an extra
    # scheme); "descriptive": a paper number reproduced as it is, or a reading of it the paper
    # never states, whose test cannot decide the paper's sentence. The report counts and shows
    # each kind apart, and the paper's theory (ids TH-*) apart from its experiments.
    kind: str = "paper"
    # a sub-row of one paper sentence (a model variant, a training range, a figure panel): the
    # sentence is counted once (lengen.report.rules.sentence_of); a sub-row that rests on a
    # DEPARTURE beyond the tier's model (log-length scaling) is counted apart (report.sentences)
    departure: bool = False
    # why the row is shown but not counted ("" : counted): a DEPARTURE sub-row, the runs of a
    # gated comparison that learned, a claim beyond the paper that cannot discriminate
    uncounted: str = ""
    # a rule judged by `holds`: what shows the sentence false; where neither holds nor this
    # does (an interval that straddles), the row reads "inconclusive" (None: not holding is
    # refuting)
    refutes: Callable[[float | Measured], bool] | None = None
    # the rules this row was judged by before a change made after the data: (label, the
    # earlier rule as a claim); REPORT.md prints each one's verdict beside today's
    earlier: tuple[tuple[str, Claim], ...] = ()

    def __post_init__(self) -> None:
        if (self.holds is None) == (self.threshold is None):
            raise ValueError(f"claim {self.id}: give exactly one of holds and threshold")
        if self.departure and not self.uncounted:
            self.uncounted = "DEPARTURE sub-row"

    @property
    def theory(self) -> bool:
        """A row of the paper's theory (Sec. 3-4, App. C-D), counted apart from experiments."""
        return self.id.startswith("TH-")

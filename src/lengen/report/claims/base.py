"""The shared base of the claims (lengen.report.claims.<experiment>): the tables a claim's
measure reads, a rule's registry entry, the run-level measures (effects resampled over runs, then
examples) and the generation tasks' shared comparisons (learned in distribution, beyond training).
Nothing here names an experiment: each experiment's module states its own rules and rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from lengen import tasks
from lengen.core.claims import NEAR_PERFECT, Claim, Measured, NotTestable
from lengen.report import effects

__all__ = ["NEAR_PERFECT", "Claim", "Measured", "NotTestable"]

# interval methods (lengen.report.effects)
RUN_MEANS_T = (
    "t-interval on the run means (Welch for a gap), at least the examples' binomial variance, "
    "95%; fewer than 3 runs in an arm: underpowered"
)
UNITS = "paired bootstrap over held-out chunks of one model (scipy), 95% percentile CI"
EXACT = "exact: computed risks, no sampling"

LEARNED_GATE = f"every compared model (run mean) >= {NEAR_PERFECT} at every tested training length"


@dataclass(frozen=True)
class Rule:
    """A paper sentence and how it is judged (its experiment's module states it beside its row;
    lengen.report.rules collects them)."""

    sentence: str  # the claim's id (its sub-rows share it: "SP-1 [neox]" is a row of "SP-1")
    section: str
    paper: str  # the paper's sentence
    window: str  # where it is measured
    threshold: float  # the minimum effect (or level) the whole CI must clear
    gate: str  # what must hold for the comparison to be testable
    interval: str
    reason: str  # why this threshold and window


def beyond(ratio: float, longest_train: int, lengths) -> list[int]:
    """The tested lengths beyond training within the paper's test-to-training length ratio of
    the experiment: (L, ratio x L]."""
    top = ratio * longest_train + 1e-9
    return sorted(int(x) for x in lengths if longest_train < x <= top)


@dataclass
class Tables:
    """The run's tidy tables by name (an experiment's, or the language branch's perplexity and
    influence tables; absent: None) and its config."""

    cfg: dict
    frames: dict[str, pd.DataFrame | None] = field(default_factory=dict)

    def table(self, name: str) -> pd.DataFrame | None:
        """A table by name (None when absent)."""
        return self.frames.get(name)


def effect_measured(found: list[effects.Effect], threshold: float, note: str = "") -> Measured:
    """The decisive effect of a rule "every effect >= threshold" (effects.decisive) as the row's
    number, with the fewest runs in its arms and, where the row is undecided (its decisive effect
    inconclusive or underpowered), what would decide it; every effect with its CI and runs as
    the row's detail."""
    worst = effects.decisive(found, threshold)
    detail = "effects (95% CI): " + "; ".join(map(str, found)) + (f"; {note}" if note else "")
    values = {"estimate": worst.estimate, "ci_low": worst.low, "ci_high": worst.high}
    decided = effects.judge(worst.low, worst.high, threshold, min(worst.runs)) in (
        "reproduced", "not reproduced")  # fmt: skip
    needed = "" if decided else effects.needed_text(found, threshold)
    return Measured(values, detail, min(worst.runs), needed)


def effect_claim(threshold: float, what: str) -> dict:
    """The rule and threshold of a claim judged on effects' run-level CIs against a minimum
    effect (effects.judge: underpowered below effects.MIN_RUNS runs in an arm)."""
    return {
        "rule": f"every CI >= {threshold:g} ({what}); a CI below it: not reproduced; "
        f"straddling: inconclusive; < {effects.MIN_RUNS} runs in an arm: underpowered",
        "threshold": threshold,
    }


def cell_levels(d: pd.DataFrame, keys: list[str], name) -> list[effects.Effect]:
    """One run-level effect per cell of `keys` (e.g. K_train, k_test, length), named by
    name(cell values)."""
    return [effects.level(g, name(*cell)) for cell, g in d.groupby(keys)]


# --- the generation tasks' comparisons (Sec. 5.2: a scratchpad task's models per variant and
# jump / depth) --------------------------------------------------------------------------------


def train_range(t: Tables, experiment: str, variant: str) -> tuple[int, int]:
    """Shortest and longest training length of one variant's models (the section's, unless the
    variant trains on its own range: tasks.variant_section)."""
    section = t.cfg[experiment]
    if variant in section.get("variants", {}):
        section = tasks.variant_section(section, variant)
    return tasks.get(experiment).train_lengths(section)


def setting_key(experiment: str) -> str:
    """The per-model setting column of a generation-scored task's table (jump, depth)."""
    return tasks.get(experiment).SETTING.key


def in_distribution(t: Tables, experiment: str) -> pd.Series | None:
    """Worst seed-mean exact match over the tested lengths inside the training range, per
    (variant, jump / depth): what "learned the task in distribution" is judged on."""
    d = t.table(experiment)
    if d is None:
        return None
    inside = [  # each variant inside its own training range
        g[g.length.between(*train_range(t, experiment, v))] for v, g in d.groupby("variant")
    ]
    d = pd.concat(inside)
    per_length = d.groupby(["variant", setting_key(experiment), "length"]).accuracy.mean()
    return per_length.groupby(level=[0, 1]).min()


def not_learned(
    t: Tables, experiment: str, variants: list[str], values: list | None = None
) -> list[str]:
    """'variant at jump/depth v (worst x.xx)' for every compared model (of the given jumps /
    depths; default all) below NEAR_PERFECT in distribution (empty: the comparison is
    testable)."""
    inside = in_distribution(t, experiment)
    param = setting_key(experiment)
    d = t.table(experiment)
    why = {}  # train.early_stop's plateau stops, e.g. "did not learn in 1500 steps"
    if "stop_reason" in d:
        plateau = d[d.stop_reason.astype(str).str.startswith("did not learn")]
        for (variant, value), g in plateau.groupby(["variant", param]):
            why[(variant, value)] = (
                f"; {g.seed.nunique()} run(s) did not learn in "
                + "/".join(str(int(s)) for s in sorted(set(g.steps_run)))
                + " steps"
            )
    return [
        f"{variant} {param} {value} ({acc:.2f}{why.get((variant, value), '')})"
        for (variant, value), acc in inside.items()
        if variant in variants and acc < NEAR_PERFECT and (values is None or value in values)
    ]


def beyond_rows(
    t: Tables, experiment: str, variant: str, value: int, ratio: float
) -> pd.DataFrame:
    """One model group's rows (every run) at the tested lengths beyond training, within the
    paper's test-to-training `ratio` applied to the variant's own training range (beyond)."""
    d = t.table(experiment)
    d = d[(d.variant == variant) & (d[setting_key(experiment)] == value)]
    longest = train_range(t, experiment, variant)[1]
    return d[d.length.isin(beyond(ratio, longest, d.length.unique()))]


def departure_note(t: Tables, experiment: str) -> str:
    """What a row of this experiment rests on that the paper's model does not have (a DEPARTURE
    in the section's model), and where the paper-faithful runs are."""
    if t.cfg[experiment]["model"].get("attn_scale") == "log_length":
        return (
            f"rests on a DEPARTURE: log-length attention scaling ({experiment}.model.attn_scale); "
            "the paper-faithful model was not run in this tier, so this row could change "
            "without it: probes/scratchpad_probes.csv has its runs (rows without attn_scale)"
        )
    return ""


def compare_beyond(
    experiment: str, better: str, worse: list[str], threshold: float, ratio: float
) -> Callable[[Tables], Measured | NotTestable | None]:
    """Measure: per jump / depth that `better` and a model in `worse` both ran, the gap (better
    minus it) in mean exact match beyond the training lengths (to `ratio` x the longest), with
    its run-level CI; the
    decisive one against `threshold`. Testable only when every compared model is >=
    NEAR_PERFECT in distribution: a model that never learned the task shows nothing about
    length generalization. The row names the section model's DEPARTURE (departure_note)."""

    def measure(t: Tables) -> Measured | NotTestable | None:
        d = t.table(experiment)
        if d is None or better not in set(d.variant) or not set(worse) & set(d.variant):
            return None
        param = setting_key(experiment)
        others = [w for w in worse if w in set(d.variant)]
        ran = lambda v: set(d[d.variant == v][param])  # noqa: E731
        values = sorted(ran(better) & set().union(*(ran(w) for w in others)))
        weak = not_learned(t, experiment, [better, *others], values)
        if weak:
            return NotTestable("not learned in distribution (< 0.9): " + ", ".join(weak))
        found = []
        for value in values:
            ours = beyond_rows(t, experiment, better, value, ratio)
            for other in others:
                theirs = beyond_rows(t, experiment, other, value, ratio)
                if len(theirs):
                    name = f"{param} {value}: {better} minus {other}"
                    found.append(effects.gap(ours, theirs, name))
        if not found:
            return None
        return effect_measured(found, threshold, departure_note(t, experiment))

    return measure

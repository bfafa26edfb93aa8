"""The shared base of the claims (lengen.report.claims.<experiment>): the tables a claim's
measure reads, a rule's registry entry, the run-level measures (effects resampled over runs, then
examples) and the generation tasks' shared comparisons (learned in distribution, beyond training).
Nothing here names an experiment: each experiment's module states its own rules and rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lengen import tasks
from lengen.core.claims import NEAR_PERFECT, ArmTest, Claim, Measured, NotTestable
from lengen.report import effects

__all__ = ["NEAR_PERFECT", "Claim", "Measured", "NotTestable"]

# a run length-generalizes: its exact match pooled over the window beyond training (to the
# paper's ratio) >= this; the paper's "generalizes well" (VA-1's threshold, Sec. 5.2.2), what the
# arms of a "significantly harm" / "significantly worse" sentence are counted on (judge_arms)
GENERALIZES = 0.8

# interval methods (lengen.report.effects)
RUN_OUTCOMES = (
    "each run against the threshold (a gap: runs paired by seed), failing only where a cell is "
    "shown below it (exact bound at 0.05 over the run's cells); reproduced when every group's "
    "pass rate is shown above 1/2 (exact binomial test, 0.05), not reproduced when some "
    "group's is shown below 1/2 (0.05 / groups), mixed otherwise; fewer than 5 runs in an "
    "arm: underpowered"
)
ARMS = (
    "each arm's runs generalize (exact match over the window >= 0.8, noise accounted for) or "
    "fail; reproduced when Boschloo's exact test shows the paper's better arm generalizing "
    "more often in every comparison (one-sided, 0.05), not reproduced when in some "
    "comparison the worse arm generalizes as often and its rate is shown above 1/2 "
    "(0.05 / comparisons), mixed otherwise; fewer than 5 runs in an arm: underpowered; each "
    "seed pair's gap shown beside"
)
UNITS = "paired bootstrap over held-out chunks of one model (scipy), 95% percentile CI"
EXACT = "exact: computed risks, no sampling"

LEARNED_GATE = f"every compared model (run mean) >= {NEAR_PERFECT} at every tested training length"


@dataclass(frozen=True, kw_only=True)
class Rule:
    """A paper sentence and how it is judged (its experiment's module states it beside its row;
    lengen.report.rules collects them). Keywords only: eight strings in a row are read by name."""

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


# the columns that name one training run of a task's table (beside the seed)
RUN_KEYS = ("variant", "k_train", "jump", "depth", "train_max_len", "seed")


@dataclass
class Tables:
    """The run's tidy tables by name (an experiment's, or the language branch's perplexity and
    influence tables; absent: None) and its config."""

    cfg: dict
    frames: dict[str, pd.DataFrame | None] = field(default_factory=dict)

    def table(self, name: str) -> pd.DataFrame | None:
        """A table by name (None when absent); one with seeds but no `run` column (a hand-made
        test table) gets run ids from its model columns and seed, as the workflow names runs."""
        d = self.frames.get(name)
        if d is not None and "seed" in d and "run" not in d:
            keys = [k for k in RUN_KEYS if k in d]
            d = d.assign(run=d[keys].astype(str).agg("/".join, axis=1))
            self.frames[name] = d
        return d


def effect_measured(
    found: list[effects.Effect], threshold: float, note: str = "", arms: tuple[ArmTest, ...] = ()
) -> Measured:
    """A rule "every effect >= threshold" measured on its runs: each run's outcome over every
    effect (effects.run_outcomes), each group's share that pass with its exact 95% interval,
    the lowest run mean as the row's estimate (no interval: none holds its coverage on runs
    like ours, lengen.report.coverage), the fewest runs in an arm, and what more evidence would
    decide it; every effect with its runs' values as the row's detail. `arms`: a sentence
    comparing arms, judged on them (effects.judge_arms). Effects without per-run values (one
    model's paired units) keep their own CI: the row is judged on it."""
    worst = effects.decisive(found)
    fewest = min(min(e.runs) for e in found)
    detail = (
        "effects (run mean; each run): "
        + "; ".join(map(str, found))
        + (f"; {note}" if note else "")
    )
    outcomes = effects.run_outcomes(found, threshold)
    if not outcomes:  # one model's units: its own CI
        values = {"estimate": worst.estimate, "ci_low": worst.low, "ci_high": worst.high}
        return Measured(values, detail, fewest)
    values = {"estimate": worst.estimate}
    passed = sum(o.passed for o in outcomes)
    values |= {"passing": passed / len(outcomes)}
    powered = all(e.powered for e in found)
    verdict = (
        effects.judge_arms(list(arms), powered) if arms else effects.judge_runs(outcomes, powered)
    )
    return Measured(
        values,
        detail,
        fewest,
        effects.more_evidence(verdict, found),
        tuple(outcomes),
        effects.group_shares(outcomes),
        tuple(arms),
    )


def effect_claim(threshold: float, what: str, arms: bool = False) -> dict:
    """The rule and threshold of a claim judged on its runs against a minimum effect
    (effects.judge_runs: underpowered below effects.MIN_RUNS runs in an arm); `arms`: a
    sentence comparing arms, judged on their generalize / fail counts (effects.judge_arms)."""
    if arms:
        rule = (
            f"each arm's runs generalize (exact match beyond training >= {GENERALIZES:g}) or "
            f"fail; every comparison's Boschloo p <= {effects.ALPHA:g}: reproduced; a worse "
            "arm generalizing as often, its rate shown above 1/2: not reproduced; else "
            f"mixed; each seed pair's gap >= {threshold:g} ({what}) shown beside; "
            f"< {effects.MIN_RUNS} runs in an arm: underpowered"
        )
    else:
        rule = (
            f"each run >= {threshold:g} ({what}) unless shown below it; every group's pass "
            "rate shown above 1/2: reproduced; some group's shown below 1/2: not "
            f"reproduced; else mixed; < {effects.MIN_RUNS} runs in an arm: underpowered"
        )
    return {"rule": rule, "threshold": threshold}


def ci_claim(threshold: float, what: str) -> dict:
    """The rule and threshold of a claim on one model's units (held-out chunks, examples): its
    95% CI against the threshold; one model is one run, so it reads underpowered, with the side
    its whole CI lies on (report.verdict's leaning)."""
    return {
        "rule": f"whole 95% CI >= {threshold:g} ({what}): reproduced; whole CI below: not "
        f"reproduced; straddling: inconclusive; < {effects.MIN_RUNS} models: underpowered, "
        "with the side its whole CI lies on",
        "threshold": threshold,
    }


def cell_levels(d: pd.DataFrame, keys: list[str], name, group=None) -> list[effects.Effect]:
    """One run-level effect per cell of `keys` (e.g. K_train, k_test, length), named by
    name(cell values)."""
    group = group or (lambda *cell: f"{keys[0]} {cell[0]}")
    return [effects.level(g, name(*cell), group(*cell)) for cell, g in d.groupby(keys)]


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


def beyond_rows(t: Tables, experiment: str, variant: str, value: int, ratio: float) -> pd.DataFrame:
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


# the recorded probes a tier's left-out variants cite (a section's `left_out`: variant -> probe
# names; a name is one probe's row, or a group's rows NAME/<value>/seed<run>): probes/README.md
PROBE_TABLE = Path(__file__).resolve().parents[4] / "probes" / "scratchpad_probes.csv"


def probe_table(t: Tables) -> pd.DataFrame | None:
    """The recorded probe table (a test may give its own as the frame "probes"); None when this
    install has none (a wheel ships no probes/)."""
    if "probes" not in t.frames:
        t.frames["probes"] = pd.read_csv(PROBE_TABLE) if PROBE_TABLE.is_file() else None
    return t.frames["probes"]


def _probe_rows(table: pd.DataFrame, name: str) -> pd.DataFrame:
    """A probe's rows: the row named `name`, or a group's rows `name`/<value>/seed<run>."""
    probe = table.probe.astype(str)
    return table[(probe == name) | probe.str.startswith(f"{name}/")]


def _worst_inside(rows: pd.DataFrame, longest: int) -> pd.Series:
    """Each probe row's worst exact match at the probe lengths inside the training range."""
    inside = [c for c in rows if c.startswith("acc_L") and int(c[5:]) <= longest]
    return rows[inside].min(axis=1)


def left_out(t: Tables, experiment: str, variants: list[str]) -> NotTestable | None:
    """The compared `variants` this tier leaves out (its section's `left_out`) as *not testable
    at this size*, with what their recorded probes measured: per variant, the runs that learned
    the training range (NEAR_PERFECT at every probe length inside it), each run's worst exact
    match there, the steps and one run's time on one core. None when none is left out."""
    named = t.cfg[experiment].get("left_out") or {}
    out = [v for v in variants if v in named]
    if not out:
        return None
    table = probe_table(t)
    longest = t.cfg[experiment]["train_max_len"]
    said = []
    for variant in out:
        names = named[variant]
        found = {n: _probe_rows(table, n) for n in names} if table is not None else {}
        rows = pd.concat(found.values()) if found else pd.DataFrame()
        if rows.empty:
            said.append(f"{variant}: no recorded row of {', '.join(names)}")
            continue
        worst = {n: _worst_inside(r, longest) for n, r in found.items()}
        per_run = pd.concat(worst.values())
        per_probe = "; ".join(
            f"{n} " + ", ".join(f"{w:.2f}" for w in ws) for n, ws in worst.items()
        )
        most = rows.steps_run.max()
        wall = rows[rows.steps_run == most].train_wall_s.dropna()
        took = f", {wall.median() / 60:.0f} min a run on one core" if len(wall) else ""
        said.append(
            f"{variant}: {int((per_run >= NEAR_PERFECT).sum())} of {len(rows)} recorded runs "
            f"learned the training range (worst exact match at lengths <= {longest}, per run: "
            f"{per_probe}) in <= {int(most):,} steps{took}"
        )
    return NotTestable(
        f"at this size: this tier trains no {', '.join(out)} model ({experiment}.left_out; "
        f"each compared model must learn its training range in every run, >= {NEAR_PERFECT}); "
        "what probes/scratchpad_probes.csv recorded: " + "; ".join(said)
    )


def learned_runs(t: Tables, experiment: str) -> set[str]:
    """The runs (run ids) that learned the task in distribution on their own: exact match >=
    NEAR_PERFECT at every tested length inside their variant's training range."""
    d = t.table(experiment)
    inside = pd.concat(
        g[g.length.between(*train_range(t, experiment, v))] for v, g in d.groupby("variant")
    )
    worst = inside.groupby("run").accuracy.min()
    return {str(r) for r in worst[worst >= NEAR_PERFECT].index}


def arm_test(better: pd.DataFrame, worse: pd.DataFrame, name: str, group: str) -> ArmTest:
    """Two arms' runs over one window: each run generalizes when its exact match pooled over
    the window is not shown below GENERALIZES (effects.run_outcomes: its test-set noise
    accounted for); the counts per arm and Boschloo's one-sided p."""

    def counts(rows: pd.DataFrame) -> tuple[int, int]:
        found = effects.run_outcomes([effects.level(rows, name)], GENERALIZES)
        return sum(o.passed for o in found), len(found)

    ours, theirs = counts(better), counts(worse)
    return ArmTest(name, group, ours, theirs, effects.boschloo(ours, theirs))


def compare_beyond(
    experiment: str,
    better: str,
    worse: list[str],
    threshold: float,
    ratio: float,
    learned_only: bool = False,
    arms: bool = False,
) -> Callable[[Tables], Measured | NotTestable | None]:
    """Measure: per jump / depth that `better` and a model in `worse` both ran, each run's gap
    (better minus the paired run, by seed) in exact match beyond the training lengths (to
    `ratio` x the longest), judged on the runs against `threshold`. Testable only when every
    compared model is >= NEAR_PERFECT in distribution (run mean): a model that never learned
    the task shows nothing about length generalization. `learned_only`: the same comparison on
    the runs that learned on their own (learned_runs), whatever the others did: what a gated
    row's learned runs say (a sub-row, not counted). The row names the section model's
    DEPARTURE (departure_note). `arms`: a sentence comparing arms ("significantly harm"),
    judged on each arm's generalize / fail counts (arm_test), the paired gaps shown beside."""

    def measure(t: Tables) -> Measured | NotTestable | None:
        d = t.table(experiment)
        if d is None:
            return None
        if not set(worse) & set(d.variant):  # none ran: left out at this size, or not run
            return left_out(t, experiment, [better, *worse])
        if better not in set(d.variant):
            return None
        param = setting_key(experiment)
        others = [w for w in worse if w in set(d.variant)]
        ran = lambda v: set(d[d.variant == v][param])  # noqa: E731
        values = sorted(ran(better) & set().union(*(ran(w) for w in others)))
        keep = learned_runs(t, experiment) if learned_only else None
        if not learned_only:
            weak = not_learned(t, experiment, [better, *others], values)
            if weak:
                return NotTestable("not learned in distribution (< 0.9): " + ", ".join(weak))
        found, tests = [], []
        for value in values:
            ours = beyond_rows(t, experiment, better, value, ratio)
            for other in others:
                theirs = beyond_rows(t, experiment, other, value, ratio)
                if keep is not None:
                    ours_k, theirs = ours[ours.run.isin(keep)], theirs[theirs.run.isin(keep)]
                else:
                    ours_k = ours
                if len(theirs) and len(ours_k):
                    name = f"{param} {value}: {better} minus {other}"
                    found.append(effects.gap(ours_k, theirs, name))
                    if arms and found[-1].per_run:
                        tests.append(
                            arm_test(ours_k, theirs, f"{param} {value}: {better} vs {other}", name)
                        )
        found = [e for e in found if e.per_run]
        if not found:
            return (
                NotTestable("no run of a compared model learned in distribution on its own")
                if learned_only
                else None
            )
        return effect_measured(found, threshold, departure_note(t, experiment), tuple(tests))

    return measure

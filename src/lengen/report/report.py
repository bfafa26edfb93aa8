"""Claims verdict report: one row per claim of the paper, with the paper's statement, the number
measured in this run, the config it came from and a verdict computed by an explicit rule. The
claims themselves (what each measures, its rule) are lengen.report.claims, one module per
experiment; this module reads the tables, judges each row and writes REPORT.md and
verdicts.csv.

Verdicts: a row of training runs is judged on its runs (lengen.report.effects, whose docstring
states the rule and its error rates): "reproduced" when every group of runs usually passes the
rule's per-run criterion, "not reproduced" when some group rarely passes, "mixed (k of n runs)"
otherwise, "underpowered" with fewer than effects.MIN_RUNS runs in an arm; a row of one model's
units (the language models) on its CI against the threshold; "not testable" when the comparison
would show nothing (models that did not learn the task in distribution; the reason is printed),
"not run" when the results it needs are absent (e.g. a tier without that experiment); a check (a
row that cannot fail by construction) "passed" / "failed". Rules read only the tidy tables
under the reports directory; nothing here is typed by hand except the paper's statements and the
thresholds, each written next to its claim.
"""

from __future__ import annotations

import argparse
import math
import os
import textwrap
from pathlib import Path

import pandas as pd

from lengen.config import artifacts
from lengen.config.config import layer_params, load
from lengen.config.tier import TierConfig
from lengen.core import provenance
from lengen.core.cli import command_parser, json_object, one_line_errors
from lengen.report import effects, reference, rules
from lengen.report.claims import (  # claims: the rows, as tests and tools read them here
    MODULES,
    PAPER_SCALE,
    by_experiment,
    claims,  # noqa: F401
)
from lengen.report.claims.base import Claim, Measured, NotTestable, Tables
from lengen.report.rules import RULES


def read_tables(cfg: dict, paths: dict[str, str] | None = None) -> Tables:
    """Load the tidy tables the report reads, by name: `paths` (name -> file, the rule's named
    inputs), by default the artifact contract's for this config (lengen.config.artifacts.
    report_tables). A table whose file is absent is None (its claims read "not run")."""
    paths = artifacts.report_tables(cfg) if paths is None else paths

    def read(path: str | None) -> pd.DataFrame | None:
        return pd.read_csv(path, dtype=provenance.DTYPES) if path and os.path.exists(path) else None

    return Tables(cfg, {name: read(path) for name, path in paths.items()})


def scale(cfg: dict, experiment: str) -> dict[str, str | float] | None:
    """The tier's model and steps for an experiment beside the paper's (issue 64: a verdict
    holds at the scale it was measured at): layers x width, the layers' parameters
    (lengen.config.config.layer_params), the most steps any of its runs may take (early stops end
    many sooner) and the ratios to the paper's; None for an experiment without a model (the
    theory) or that the tier does not run. One the paper has no model for (majority) has only
    its `short` line."""
    paper, section = PAPER_SCALE.get(experiment), cfg.get(experiment)
    if not isinstance(section, dict) or "model" not in section:
        return None
    model = section["model"]
    if experiment == "natural_language":
        steps = section["short"]["train"]["steps"]
    else:
        overrides = [v.get("train", {}).get("steps") for v in section.get("variants", {}).values()]
        steps = max([section["train"]["steps"], *[s for s in overrides if s]])
    if paper is None:
        return {
            "short": f"{model['n_layer']} x {model['d_model']}, <= {steps:,} steps (no "
            "model in the paper)"
        }
    ours, theirs = layer_params(model), layer_params(paper)
    short = (
        f"{model['n_layer']} x {model['d_model']}, <= {steps:,} steps (paper: "
        f"{paper['n_layer']} x {paper['d_model']}, {paper['steps']:,})"
    )
    return {
        "experiment": experiment,
        "model": f"{model['n_layer']} x {model['d_model']}",
        "layer_params_m": ours / 1e6,
        "steps": steps,
        "paper_model": f"{paper['n_layer']} x {paper['d_model']}",
        "paper_layer_params_m": theirs / 1e6,
        "paper_steps": paper["steps"],
        "params_ratio": theirs / ours,
        "steps_share": steps / paper["steps"],
        "short": short,
    }


def share(x: float) -> str:
    """A share of the paper's budget as REPORT.md states it: a percentage from 1%, a fraction
    below (a smoke tier's few steps are 1/8,333 of the paper's, not "0%")."""
    return f"{x:.0%}" if x >= 0.01 else f"1/{1 / x:,.0f}"


def millions(x: float) -> str:
    """Parameters in millions as the scale table states them: two decimals from 0.1 M, two
    significant digits below (a smoke tier's 0.0012 M, not "0.00 M")."""
    return f"{x:.2f}" if x >= 0.1 else f"{x:.2g}"


def scale_table(cfg: dict) -> str:
    """REPORT.md's opening table: each experiment's model and steps beside the paper's."""
    rows = [s for name in PAPER_SCALE if (s := scale(cfg, name)) and "experiment" in s]
    if not rows:
        return ""
    frame = pd.DataFrame(
        [
            {
                "experiment": s["experiment"],
                "this tier": f"{s['model']} ({millions(s['layer_params_m'])} M layer "
                f"parameters), <= {s['steps']:,} steps",
                "the paper": f"{s['paper_model']} ({s['paper_layer_params_m']:,.0f} M), "
                f"{s['paper_steps']:,} steps",
                "scale": f"1/{s['params_ratio']:,.0f} of the parameters, "
                f"<= {share(s['steps_share'])} of the steps",
            }
            for s in rows
        ]
    )
    return reference.markdown_table(frame)


def verdict(claim: Claim, tables: Tables, at: str = "", earlier_rule: bool = False) -> dict:
    """One report row: the claim, its measurement and verdict; `at`, the scale it is measured
    at (an experiment's: scale(...)["short"]). `earlier_rule`: judged as the rule of
    effects.EARLIER judged (what REPORT.md prints beside today's verdict)."""
    value = claim.measure(tables)
    measured_as = claim.measured_as
    lean = ""
    if isinstance(value, NotTestable):
        result, shown = "not testable", "-"
        measured_as = f"{measured_as}; not testable: {value.reason}"
    elif value is None or (isinstance(value, float) and math.isnan(value)):
        result, shown = "not run", "-"
    else:
        # a claim of runs (paper or beyond) needs effects.MIN_RUNS runs per arm for a verdict
        of_runs = getattr(value, "runs", None) if claim.kind in ("paper", "beyond") else None
        if isinstance(value, Measured) and value.outcomes:  # judged on its runs
            outcomes = list(value.outcomes)
            powered = of_runs is None or of_runs >= effects.MIN_RUNS
            if earlier_rule:
                result, lean = judged_earlier(outcomes, of_runs)
            elif value.arms:  # a sentence comparing arms: their generalize / fail counts
                result = effects.judge_arms(list(value.arms), powered)
                lean = effects.arm_leaning(list(value.arms))
            else:
                result = effects.judge_runs(outcomes, powered)
                lean = effects.leaning(outcomes)
        elif claim.threshold is not None:  # one model's units: its CI against the threshold
            low, high = value["ci_low"], value["ci_high"]
            result = effects.judge(low, high, claim.threshold, of_runs)
            lean = "for" if low >= claim.threshold else "against" if high < claim.threshold else ""
        else:
            refuted = claim.refutes(value) if claim.refutes else not claim.holds(value)
            held = claim.holds(value)
            if of_runs is not None and of_runs < effects.MIN_RUNS:
                result = effects.UNDERPOWERED
                lean = "for" if held else "against" if refuted and claim.refutes else ""
            else:
                result = "reproduced" if held else "not reproduced" if refuted else "inconclusive"
        if claim.kind == "check":  # a check passes or fails; it reproduces nothing
            result = {"reproduced": "passed", "not reproduced": "failed"}.get(result, result)
        shown = str(value) if isinstance(value, Measured) else f"{value:.3f}"
        if isinstance(value, Measured) and value.detail:
            measured_as = f"{measured_as}; {value.detail}"
        if isinstance(value, Measured) and value.more and result != "reproduced":
            shown = f"{shown}; {value.more}"
    runs = value.runs if isinstance(value, Measured) else None
    outcomes = value.outcomes if isinstance(value, Measured) else ()
    earlier = [] if earlier_rule else earlier_verdicts(claim, value, tables)
    return {
        "id": claim.id,
        "sentence": rules.sentence_of(claim.id),
        "kind": claim.kind,
        "area": "theory" if claim.theory else "experiment",
        "counted": f"no: {why}"
        if (why := claim.uncounted or getattr(value, "uncounted", ""))
        else "yes",
        "section": claim.section,
        "paper": claim.paper,
        "measured": shown,
        "measured as": measured_as,
        "rule": claim.rule,
        "verdict": result,
        # an underpowered row's runs (or its one model's CI) all on one side: "for" / "against"
        # the paper's reading (said with the verdict, never counted as one)
        "leaning": lean if result == effects.UNDERPOWERED else "",
        # the verdicts earlier rules give (a rule changed after the data), printed beside
        "earlier": "; ".join(earlier),
        **numbers(value),
        "runs": math.nan if runs is None else runs,
        "passing": value.values.get("passing", math.nan) if outcomes else math.nan,
        "groups": "; ".join(f"{g.group}: {g}" for g in value.groups) if outcomes else "",
        "outcomes": "; ".join(
            f"{o.run} {o.value:.3f} {'pass' if o.passed else 'fail'}" for o in outcomes
        ),
        "runs_by_group": value.runs_text() if outcomes else "",
        "error_rates": error_rates(value) if outcomes else "",
        # the runs per group (a comparison of arms: better and worse arm, "5v5")
        "sizes": sizes(value) if outcomes else "",
        "scale": "" if result == "not run" else at,  # a row nothing measured holds at no scale
        # for the figure of every run (write_report), not for verdicts.csv
        "_runs": {
            "id": claim.id,
            "verdict": shown_verdict(
                {"verdict": result, "leaning": lean if result == effects.UNDERPOWERED else ""},
                earlier=False,
            ),
            "threshold": claim.threshold,
            "outcomes": outcomes,
        }
        if outcomes and claim.threshold is not None
        else None,
    }


def judged_earlier(outcomes: list, fewest: int | None) -> tuple[str, str]:
    """The verdict the rule of effects.EARLIER gives a row's runs, and its leaning where it is
    underpowered ("" otherwise)."""
    result = effects.judge_runs_earlier(outcomes, fewest)
    lean = effects.leaning(outcomes, observed=True) if result == effects.UNDERPOWERED else ""
    return result, lean


def earlier_verdicts(claim: Claim, value, tables: Tables) -> list[str]:
    """The verdicts the earlier rules give, as "rule of DATE: verdict": for a row of runs, the
    rule of effects.EARLIER on today's measurement; then each of the claim's own earlier rules
    (Claim.earlier), judged as they were."""
    found = []
    if isinstance(value, Measured) and value.outcomes:
        result, lean = judged_earlier(list(value.outcomes), value.runs)
        row = {"verdict": result, "leaning": lean}
        found.append(f"rule of {effects.EARLIER}: {shown_verdict(row, earlier=False)}")
    for label, old in claim.earlier:
        found.append(f"{label}: {shown_verdict(verdict(old, tables, earlier_rule=True), False)}")
    return found


def error_rates(value: Measured) -> str:
    """A row of runs' error rates in words, for its group sizes (effects.error_text) or, for a
    sentence comparing arms, its arms' sizes (effects.arm_error_text)."""
    if value.arms:
        return effects.arm_error_text(tuple((t.better[1], t.worse[1]) for t in value.arms))
    return effects.error_text(tuple(g.runs for g in value.groups))


def sizes(value: Measured) -> str:
    """The runs per group of a row of runs ("5 5 5"), or per compared arm pair ("5v5 5v5")."""
    if value.arms:
        return " ".join(f"{t.better[1]}v{t.worse[1]}" for t in value.arms)
    return " ".join(str(g.runs) for g in value.groups)


def error_table(rows: pd.DataFrame) -> str:
    """REPORT.md's table of how often the rules err, one line per group layout its rows of runs
    have (exact, effects.error_rates; beside it the rule of effects.EARLIER's on the same
    layout): P(reproduced) and P(not reproduced) when every run passes with probability
    0.5, 0.7, 0.9."""
    layouts = [
        x
        for x in dict.fromkeys(rows.get("sizes", pd.Series(dtype=str)).dropna())
        if x and "v" not in x
    ]
    if not layouts:
        return ""
    lines = []
    for layout in layouts:
        n = tuple(int(x) for x in layout.split())
        at = effects.judged_sizes(n)
        now, then = effects.error_rates(at), effects.error_rates(n, earlier=True)
        cell = lambda r: ", ".join(f"{a:.3f} / {b:.3f}" for a, b in r.values())  # noqa: E731
        lines.append(
            {
                "runs per group": layout.replace(" ", ", "),
                f"today, at >= {effects.MIN_RUNS} runs per group": cell(now),
                f"rule of {effects.EARLIER}, on these runs": cell(then),
            }
        )
    return reference.markdown_table(pd.DataFrame(lines))


def shown_verdict(row, earlier: bool = True) -> str:
    """The verdict as the report prints it: an underpowered row with its leaning ("underpowered,
    against the paper's reading"), then (`earlier`) the verdicts earlier rules give, in
    brackets."""
    lean = row.get("leaning")
    text = row["verdict"]
    if isinstance(lean, str) and lean:
        text = f"{text}, {lean} the paper's reading"
    old = row.get("earlier") if earlier else ""
    return f"{text} ({old})" if isinstance(old, str) and old else text


# how a sentence's counted sub-rows combine: the first verdict in this order that any sub-row
# has, except that "reproduced" needs every sub-row reproduced
PRECEDENCE = (
    "not reproduced",
    "failed",
    effects.MIXED,
    "inconclusive",
    effects.UNDERPOWERED,
    "not testable",
    "not run",
)


def category(verdict: str) -> str:
    """A verdict's word without its counts ("mixed (2 of 3 runs)" -> "mixed")."""
    return effects.MIXED if verdict.startswith(effects.MIXED) else verdict


def combined(verdicts: list[str]) -> str:
    """One sentence's verdict from its counted sub-rows' (PRECEDENCE)."""
    if all(v == verdicts[0] for v in verdicts):
        return verdicts[0]
    first = next(c for c in PRECEDENCE if c in map(category, verdicts))
    return next(v for v in verdicts if category(v) == first)


DEPARTURE_ROW = "no: DEPARTURE sub-row"  # the counted column of a sub-row on a DEPARTURE


def sentences(rows: pd.DataFrame, departure: bool = False) -> pd.DataFrame:
    """One row per paper sentence (rules.sentence_of), from its counted sub-rows: its kind,
    area and combined verdict. `departure`: from its sub-rows resting on a DEPARTURE beyond the
    paper's model instead (log-length scaling), the summary's second count: a sentence is counted
    once in each, never mixed."""
    counted = rows[rows.counted == (DEPARTURE_ROW if departure else "yes")]
    return (
        counted.groupby("sentence", sort=False)
        .agg(kind=("kind", "first"), area=("area", "first"), verdict=("verdict", list))
        .assign(verdict=lambda d: d.verdict.map(combined))
        .reset_index()
    )


def counts(per_sentence: pd.DataFrame, kind: str, area: str | None = None) -> str:
    """'n verdict, ...' over the sentences of one kind (and area), or 'none'."""
    d = per_sentence[per_sentence.kind == kind]
    d = d if area is None else d[d.area == area]
    found = d.verdict.map(category).value_counts().to_dict()
    return ", ".join(f"{n} {k}" for k, n in sorted(found.items())) or "none"


CELL = 100  # README's verdict block: no cell longer (a table a reader scans)


def summary(rows: pd.DataFrame) -> str:
    """The verdicts in brief, one line per paper sentence (README's block): the sentence (the
    registry's text, cut to CELL characters), its verdict (with an underpowered row's leaning)
    and what decided it: "k of n runs pass" for a row of runs, else its number or the reason it
    has none, cut at a clause (shortened); REPORT.md has every sub-row and run."""
    per, dep = sentences(rows), sentences(rows, departure=True)
    lines = [
        f"Each paper sentence once, on the paper's model: experiments "
        f"{counts(per, 'paper', 'experiment')}; theory (exact computations on toy cases) "
        f"{counts(per, 'paper', 'theory')}; descriptive {counts(per, 'descriptive')}; checks "
        f"{counts(per, 'check')}; beyond the paper {counts(per, 'beyond')}. Counted apart, under "
        f"a DEPARTURE beyond the paper's model: experiments {counts(dep, 'paper', 'experiment')}.",
        "",
        *_summary_table(rows, per, "yes"),
    ]
    if len(dep):
        lines += [
            "",
            "Under a DEPARTURE beyond the paper's model (each named in its REPORT.md "
            "row), counted apart:",
            "",
            *_summary_table(rows, dep, DEPARTURE_ROW),
        ]
    return "\n".join(lines)


def _summary_table(rows: pd.DataFrame, per: pd.DataFrame, counted: str) -> list[str]:
    """The summary's table of sentences `per` (sentences(...)), each from its sub-rows whose
    counted column is `counted`."""
    lines = ["| sentence | the paper | verdict | decided by |", "| --- | --- | --- | --- |"]
    for s in per.itertuples():
        sub = rows[(rows.sentence == s.sentence) & (rows.counted == counted)]
        first = sub[sub.verdict == s.verdict].iloc[0]  # combined() picks a sub-row's verdict
        outcomes = first.get("outcomes")
        if isinstance(outcomes, str) and outcomes:
            n, k = outcomes.count(" pass") + outcomes.count(" fail"), outcomes.count(" pass")
            measured = f"{k} of {n} run{'s' if n != 1 else ''} pass"
        elif first["verdict"] == "not run":
            measured = ""
        elif first["measured"] == "-":  # not testable: the reason
            measured = first["measured as"].split("not testable: ")[-1]
        else:
            measured = first["measured"]
        paper = RULES[s.sentence].paper if s.sentence in RULES else first["paper"]
        lines.append(
            f"| {s.sentence} | {shortened(paper, CELL)} | {shown_verdict(first)} | "
            f"{shortened(measured, CELL) if measured else '-'} |"
        )
    return lines


def shortened(text: str, limit: int = 160) -> str:
    """`text` cut to at most `limit` characters at a clause (`; `), never inside one (a number
    cut mid-way reads as another number); a first clause longer than that, at a word, with
    an ellipsis."""
    if len(text) <= limit:
        return text
    kept = ""
    for clause in text.split("; "):
        longer = f"{kept}; {clause}" if kept else clause
        if len(longer) > limit:
            break
        kept = longer
    if kept:
        return kept + "; ..."
    return text[:limit].rsplit(" ", 1)[0] + " ..."


PLUMBING = "no: plumbing tier"  # the counted column of a tier that cannot test the paper

SHOWN = (
    "id",
    "section",
    "paper",
    "measured",
    "verdict",
    "counted",
)  # REPORT.md's tables; each row's "measured as" and "rule" follow its table as a list
DETAILS = ("measured as", "rule")
WRAP = 100  # REPORT.md's prose and lists are wrapped here (a table row is one line, unpadded)


def numbers(value) -> dict[str, float]:
    """The headline number of a measurement and its 95% CI (NaN where there is none), for the
    machine-readable verdict table: a float as it is; a Measured's first number and its CI."""
    nan = math.nan
    if isinstance(value, Measured):
        name = next(iter(value.values))
        low, high = Measured.ci_keys(name)
        return {
            "value": value[name],
            "ci_low": value.values.get(low, nan),
            "ci_high": value.values.get(high, nan),
        }
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"value": float(value), "ci_low": nan, "ci_high": nan}
    return {"value": nan, "ci_low": nan, "ci_high": nan}


def notes() -> list[str]:
    """REPORT.md's closing paragraphs: each claims module's NOTE (where to look when its
    verdicts fail), in the report's order."""
    return [m.NOTE for m in MODULES if getattr(m, "NOTE", "")]


def write_report(
    cfg: dict,
    out: Path,
    paths: dict[str, str] | None = None,
    reference_path: str | Path | None = None,
    reference_label: str | None = None,
    figures: list[str] | None = None,
    judged: str | None = None,
    trained_at: str | None = None,
) -> pd.DataFrame:
    """REPORT.md for the config's run (the report's slice of it,
    lengen.config.artifacts.report_config, is enough): the verdict table, the figures it rests
    on and the comparison with the committed reference (lengen.report.reference: its
    verdicts.csv at `reference_path`, shown as `reference_label`); the machine-readable verdicts
    go to verdicts.csv beside `out`. `paths` as read_tables; `figures`, the run's figure files
    (artifacts.report_figures of the whole config: the slice has no `figures` sections, so
    without them the list misses the figures only those sections add). `judged`: a line under
    the provenance saying which commit trained the tables and which judged them (a reference
    judged again by lengen.report.rejudge); `trained_at`, that reference's training commit: the
    figure of every run (artifacts.RUNS_FIGURE, drawn beside `out`) keeps it as its commit."""
    tables = read_tables(cfg, paths)
    scales = {name: scale(cfg, name) for name, _ in by_experiment(cfg)}
    rows = pd.DataFrame(
        [verdict(c, tables, (scales.get(e) or {}).get("short", "")) for e, c in by_experiment(cfg)]
    )
    tests_paper = cfg.get("tests_the_paper", TierConfig.tests_the_paper)
    if not tests_paper:  # a plumbing tier: every row shown, none counted
        rows["counted"] = PLUMBING
    ref = reference.read(reference_path)
    label = reference_label or "`{}`".format(
        reference_path or reference.reference_dir(cfg["tier"]) / artifacts.VERDICTS
    )
    per_sentence = sentences(rows)
    per_departure = sentences(rows, departure=True)
    opening = scale_table(cfg)

    def counted(kind: str, area: str | None = None) -> str:
        return counts(per_sentence, kind, area)

    def table(kind: str) -> str:
        """The kind's rows as a table, then how each was measured and its rule, wrapped."""
        mine = rows[rows.kind == kind]
        details = [
            textwrap.fill(
                f"**{r['id']}**: measured as {r['measured as']}. Rule: {r['rule']}."
                + (f" At: {r['scale']}." if r.get("scale") else "")
                + (f" Runs: {r['runs_by_group']}." if r.get("runs_by_group") else "")
                + (f" Error rates: {r['error_rates']}." if r.get("error_rates") else ""),
                WRAP,
                initial_indent="- ",
                subsequent_indent="  ",
                break_long_words=False,
                break_on_hyphens=False,
            )
            for _, r in mine.iterrows()
        ]
        shown = mine.assign(verdict=[shown_verdict(r) for _, r in mine.iterrows()])
        return "\n".join([reference.markdown_table(shown[list(SHOWN)]), "", *details])

    if tests_paper:
        title = "# Does the paper hold? Claims and verdicts"
        tally = (
            "Each paper sentence is counted once (its variants, training ranges and panels are "
            "sub-rows; a sub-row resting on a DEPARTURE beyond the paper's model is counted apart, "
            f"never mixed). The paper's experiments: {counted('paper', 'experiment')}; under a "
            f"DEPARTURE: {counts(per_departure, 'paper', 'experiment')}. The paper's "
            f"theory (exact computations on toy cases): {counted('paper', 'theory')}. "
            "Descriptive rows (a paper number, or a reading the paper never states, whose test "
            f"cannot decide a sentence): {counted('descriptive')}. Checks (cannot fail by "
            f"construction): {counted('check')}. Beyond the paper: {counted('beyond')}."
        )
    else:
        title = f"# Tier `{cfg['tier']}`: a plumbing check, not a test of the paper"
        tally = (
            f"This tier cannot test the paper (`tests_the_paper: false`): its models and "
            "lengths are too small to learn the tasks; it shows that every job of the pipeline "
            f"runs and writes what the report reads. Nothing is counted: its {len(rows)} rows "
            "are the rules applied to toy numbers, and a verdict word below says what the rule "
            "makes of them, not what the paper claims. The tiers that test the paper: default, "
            "gpu, paper (README, Tiers)."
        )
    lines = [
        title,
        "",
        f"Tier `{cfg['tier']}`. Every number below is computed by `lengen.report.report` from the "
        f"tidy tables in `{cfg['reports_dir']}/`; every verdict by the rule in its row.",
        "",
        provenance.markdown_line(cfg, cfg["seed"]),
        *(["", judged] if judged else []),
        "",
        *(
            [
                "**Scale.** Every experimental verdict below holds at this tier's size, not the "
                "paper's: a *not reproduced* here is no refutation of a sentence about the paper's "
                "models, and a *mixed*, *underpowered* or *not testable* says what this size "
                "cannot "
                "show.",
                "",
                opening,
                "",
            ]
            if opening
            else []
        ),
        tally,
        "",
        textwrap.fill(
            "Verdicts (docs/rules.md): the run is the unit of evidence, and runs like ours either "
            "generalize or fail. (1) A run passes the row's criterion (its accuracy, or its gap to "
            "the paired run of the compared arm, against the rule's threshold in every cell the "
            "rule names) unless a cell shows it below the threshold: an exact bound at 0.05 shared "
            "over the run's cells, so that a run truly at the threshold fails from test-set noise "
            "alone at most 5% of the time. (2) A model group (what the sentence quantifies over: a "
            "K_train, a pair of jumps, a depth) *usually passes* when an exact binomial test shows "
            "its runs' pass rate above 1/2 (5 of 5, 7 of 8, 9 of 10 runs). (3) A row is "
            "*reproduced* when every group usually passes; *not reproduced* when its runs are "
            "shown to pass less than half the time, pooled (at 0.025) or in one group (at 0.025 / "
            "G, G groups; a row of one group at 0.05); *mixed (k of n runs)* otherwise; with fewer "
            f"than {effects.MIN_RUNS} runs in a compared arm *underpowered*, with the side its "
            "runs lie on when they agree. If every run passes with probability 1/2, each of "
            "*reproduced* and *not reproduced* happens at most 5% of the time; the table below "
            "gives both rates for each layout of groups in this report, and every row its own. A "
            "sentence comparing "
            'arms ("significantly harm", "significantly worse") counts each arm\'s runs that '
            "generalize (exact match beyond training >= 0.8): *reproduced* when Boschloo's exact "
            "test shows the paper's better arm generalizing more often in every comparison "
            "(one-sided, 0.05), *not reproduced* when the worse arms are shown to generalize more "
            "often than not and one does as often as its better arm; each seed pair's gap is shown "
            "beside. In brackets after a verdict: what the rule of "
            f"{effects.EARLIER} gives on the same runs (a run passed on its observed worst cell; a "
            "row was reproduced when every run passed, not reproduced when every run of some group "
            "failed, decided from 3 runs per arm), and any earlier rule of that row changed after "
            "the data. The run mean is shown without an interval: none holds its coverage on runs "
            "that either generalize or fail (docs/rules.md). *Not testable*: the compared models "
            "did not learn the task in distribution (the reason, and what the runs that did learn "
            "say, are printed), or, *at this size*, the tier trains none of a compared model "
            "(its `left_out`: what the recorded probes of it measured is printed); *inconclusive*: "
            "one model's interval straddles the line; *not run*: the tier has no such results. "
            "Every rule, window and threshold is the registry's (`lengen.report.rules`, "
            "docs/rules.md).",
            WRAP,
            break_on_hyphens=False,
        ),
        "",
        *(
            [
                "How often the rules err, for each layout of runs per group in this report: "
                "P(reproduced) / P(not reproduced) when every run passes with probability 0.5, 0.7 "
                f"and 0.9 (exact). Today's rule at {effects.MIN_RUNS} runs per group where a row "
                "has fewer (such a row reads underpowered); the rule of "
                f"{effects.EARLIER} on the row's own runs (0 where it read underpowered).",
                "",
                errors,
                "",
            ]
            if (errors := error_table(rows))
            else []
        ),
        "## Claims of the paper",
        "",
        table("paper"),
        "",
        "## Descriptive rows (a paper number, not the reading drawn from it)",
        "",
        table("descriptive"),
        "",
        "## Checks (cannot fail by construction)",
        "",
        table("check"),
        "",
        "## Beyond the paper",
        "",
        table("beyond"),
        "",
        *reference.section(provenance.stamp(rows, cfg, cfg["seed"]), ref, label),
        f"Every training run, by sentence and model group: `{artifacts.RUNS_FIGURE}`.",
        "",
        f"![every run]({artifacts.RUNS_FIGURE})",
        "",
        "Figures: "
        + ", ".join(f"`{name}`" for name in figures or artifacts.report_figures(cfg))
        + ".",
        "",
        *[line for note in notes() for line in (note, "")],
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    write_html("\n".join(lines), out.parent / artifacts.REPORT_HTML)
    draw_every_run(rows, cfg, out.parent / artifacts.RUNS_FIGURE, trained_at)
    rows = rows.drop(columns="_runs")
    provenance.stamp(rows, cfg, cfg["seed"]).to_csv(out.parent / artifacts.VERDICTS, index=False)
    return rows


def draw_every_run(rows: pd.DataFrame, cfg: dict, out: Path, trained_at: str | None) -> None:
    """The figure of every run (lengen.report.figures.draw_runs), its provenance in the PNG as
    every figure's (a reference judged again keeps its training commit, `trained_at`, and names
    the drawing code's)."""
    from lengen.report import figures

    meta = provenance.png_metadata(
        {"figure": "verdict_runs", "config": cfg}, cfg["seed"], trained_at
    )
    figures.draw_runs([r for r in rows["_runs"] if r], out, meta)


# REPORT.html: styled under one class, so that inside Snakemake's report.html (its front page
# includes it) nothing of the page around it changes
PAGE = """<div class="lengen-report">
<style>
.lengen-report {{ font-family: sans-serif; font-size: 14px; line-height: 1.4; max-width: 1400px; }}
.lengen-report table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 12px;
  width: 100%; }}
.lengen-report th, .lengen-report td {{ border: 1px solid #ccc; padding: 3px 6px;
  vertical-align: top; text-align: left; }}
.lengen-report th {{ background: #f0f0f0; }}
.lengen-report td:nth-child(5) {{ max-width: 40em; }}
.lengen-report img {{ max-width: 100%; }}
</style>
{body}
</div>
"""


def write_html(markdown_text: str, out: Path) -> None:
    """REPORT.md rendered as HTML (its tables as tables): a page any browser opens, and the
    front page of Snakemake's report.html. No script, no path beyond what REPORT.md says."""
    import markdown

    body = markdown.markdown(markdown_text, extensions=["tables"], output_format="html")
    out.write_text(PAGE.format(body=body))


# pragma: no mutate block  (CLI wiring: tested through the workflow in subprocesses)
@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: python -m lengen.report.report --config CONFIG.yaml|JSON --out reports/REPORT.md."""
    parser = command_parser(__spec__, __doc__)
    parser.add_argument(
        "--config",
        required=True,
        help="a whole config YAML file (validated), or the JSON of its report slice (the rule's)",
    )
    parser.add_argument(
        "--table",
        nargs="*",
        default=None,
        metavar="NAME=PATH",
        help="the tables to read (default: the artifact contract's for the config)",
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--reference",
        default=None,
        metavar="VERDICTS_CSV",
        help="the committed reference's verdicts.csv to compare with (absent: none)",
    )
    parser.add_argument("--reference-label", default=None, help="how REPORT.md names it")
    parser.add_argument(
        "--figures",
        nargs="*",
        default=None,
        metavar="FILE",
        help="the run's figure files (default: artifacts.report_figures of the config)",
    )
    parser.add_argument("--tracking-uri", help="log the report to this MLflow store...")
    parser.add_argument("--experiment", help="...in this experiment, as run report/REPORT")
    parser.add_argument(
        "--attach",
        nargs="*",
        default=[],
        type=Path,
        metavar="FILE",
        help="more tidy tables the report run holds beside the ones it reads (diagnostics)",
    )
    args = parser.parse_args(argv)
    figures = args.figures
    if os.path.exists(args.config):
        whole = load(args.config)
        cfg, figures = artifacts.report_config(whole), figures or artifacts.report_figures(whole)
    else:
        try:
            cfg = json_object(args.config)
        except argparse.ArgumentTypeError as err:
            parser.error(f"--config: neither a file nor the JSON of a report slice ({err})")
    paths = None if args.table is None else dict(t.split("=", 1) for t in args.table)
    write_report(cfg, args.out, paths, args.reference, args.reference_label, figures)
    if args.tracking_uri:
        tables = [Path(p) for p in (paths or artifacts.report_tables(cfg)).values()]
        log_report(args.out, cfg, [*tables, *args.attach], args.tracking_uri, args.experiment)


def log_report(out: Path, cfg: dict, tables: list[Path], uri: str, experiment: str) -> str:
    """The report's MLflow run, `report/REPORT`: REPORT.md, REPORT.html, verdicts.csv and every
    tidy table of the run as artifacts, the report's config slice as params, its provenance as
    tags; a rerun's run replaces the last one, naming what changed (tracking.log_file_run)."""
    from lengen.core import provenance, tracking

    tracking.prepare_store(uri, [experiment])
    files = [
        out,
        out.parent / artifacts.REPORT_HTML,
        out.parent / artifacts.VERDICTS,
        *dict.fromkeys(t for t in tables if t.exists()),
    ]
    tags = provenance.record(cfg, cfg.get("seed", ""))
    return tracking.log_file_run(uri, experiment, "report/REPORT", files, tags, cfg)


if __name__ == "__main__":
    main()

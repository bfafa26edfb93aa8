"""Typed run specs (lengen.core.specs.Spec): every job's JSON parses into them, a parameter can be
followed by attribute, and a spec with a stray or missing key fails naming it."""

from __future__ import annotations

import json

import pytest

from lengen import tasks
from lengen.config.config import load
from lengen.core.specs import EarlyStopSpec, SpecError, TrainSpec
from lengen.tasks import natural_language, parse_spec, sparse_parity, variable_assignment
from tests.conftest import ROOT


@pytest.mark.parametrize("tier", ["smoke", "config", "paper"])
def test_every_job_spec_of_a_tier_parses(tier):
    cfg = load(ROOT / "config" / f"{tier}.yaml")
    built = [sparse_parity.train_spec(cfg, k) for k in cfg["sparse_parity"]["k_train"]]
    for name, task in tasks.generation_tasks().items():
        if name not in cfg:  # majority is not in the paper's tiers
            continue
        section = cfg[name]
        for variant, var in section["variants"].items():
            value = section[task.SETTING.values][0]
            built += [
                tasks.generation_spec(cfg, name, variant, value, run) for run in range(var["runs"])
            ]
    built += [natural_language.train_spec(cfg, which) for which in ("short", "long")]
    for source in built:
        spec = parse_spec(json.loads(json.dumps(source)))  # as a job receives it
        assert spec.source == source and isinstance(spec.train, TrainSpec)
        assert isinstance(spec.task, tasks.get(source["experiment"]).TaskSpec)
        assert spec.train.steps == source["train"]["steps"] and spec.seed == source["seed"]


def test_a_parameter_is_followed_by_attribute():
    cfg = load(ROOT / "config" / "smoke.yaml")
    spec = parse_spec(sparse_parity.train_spec(cfg, 4))
    assert isinstance(spec.task, sparse_parity.TaskSpec) and spec.task.k_train == 4
    va = parse_spec(tasks.generation_spec(cfg, "variable_assignment", "ppc", 3, 1))
    assert isinstance(va.task, variable_assignment.TaskSpec)
    assert (va.task.depth, va.task.scheme, va.seed) == (3, "ppc", cfg["seed"] + 1)
    early = parse_spec(tasks.generation_spec(cfg, "parity_scratchpad", "absolute", 1, 0))
    assert isinstance(early.train.early_stop, EarlyStopSpec)  # the variant's train override
    assert (early.train.early_stop.plateau_steps, early.train.early_stop.min_steps) == (2, 0)
    half = early.with_batch_size(3)  # a process's micro-batch: same job, same source
    assert half.train.batch_size == 3 and half.source is early.source
    assert parse_spec(half) is half


def test_a_stray_or_missing_key_is_an_error_naming_it():
    cfg = load(ROOT / "config" / "smoke.yaml")
    good = sparse_parity.train_spec(cfg, 2)
    with pytest.raises(SpecError, match=r"section 'task': unknown key\(s\) \['k_trian'\]"):
        parse_spec({**good, "task": {**good["task"], "k_trian": 3}})
    task = {k: v for k, v in good["task"].items() if k != "n"}
    with pytest.raises(SpecError, match=r"section 'task': missing key\(s\) \['n'\]"):
        parse_spec({**good, "task": task})
    early = {"every": 10, "target_accuracy": 0.9, "patience": 2, "plateau": 3}
    with pytest.raises(SpecError, match=r"'train.early_stop': unknown key\(s\) \['plateau'\]"):
        parse_spec({**good, "train": {**good["train"], "early_stop": early}})
    with pytest.raises(SpecError, match=r"section 'spec': unknown key\(s\) \['extra'\]"):
        parse_spec({**good, "extra": 1})
    with pytest.raises(SpecError, match="experiment 'nope' is not a task; known: .*sparse_parity"):
        parse_spec({**good, "experiment": "nope"})

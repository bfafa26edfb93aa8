"""Test helpers: a complete, typed run spec from a few overrides (lengen.core.specs.Spec), a
spec or config on a device, and scripts outside the package loaded as modules."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from lengen.core.specs import Spec
from lengen.tasks import parse_spec

TASK_DEFAULTS = {
    "sparse_parity": {"k_train": 2, "n": 20, "train_min_len": 8, "train_max_len": 16, "l_max": 40},
    "parity_scratchpad": {
        "jump": 1,
        "scheme": "ppc",
        "train_min_len": 4,
        "train_max_len": 10,
        "l_max": 40,
    },
    "variable_assignment": {
        "depth": 2,
        "scheme": "ppc",
        "train_min_len": 10,
        "train_max_len": 20,
        "l_max": 60,
        "n_vars": 20,
        "scratchpad": True,
    },
    "majority": {"train_max_len": 11, "scheme": "absolute", "train_min_len": 5, "l_max": 40},
    "natural_language": {"context": 16, "l_max": 33, "train_tokens": "unused/train.bin"},
}
TRAIN_DEFAULTS = {
    "steps": 100,
    "batch_size": 4,
    "lr": 1e-3,
    "weight_decay": 0.0,
    "warmup_steps": 0,
    "schedule": "constant",
}


def make_spec(experiment: str, task=None, train=None, model=None, **top) -> Spec:
    """A valid spec of `experiment`: the defaults above with the given keys replaced."""
    return parse_spec(
        {
            "experiment": experiment,
            "run_name": "test",
            "seed": 0,
            "task": {**TASK_DEFAULTS[experiment], **(task or {})},
            "model": model or {},
            "train": {**TRAIN_DEFAULTS, **(train or {})},
            "runtime": {"device": "cpu", "precision": "fp32", "zero_stage": 0},
            "tracking": {"uri": "sqlite:///unused.db", "experiment": "test"},
            **top,
        }
    )


def on_device(spec: dict, device: str) -> dict:
    """A job spec or tier config (dict, its `runtime` section) set to run on `device`: the GPU
    tiers' bf16 on cuda (config/gpu.yaml, config/paper.yaml), the CPU tiers' fp32 on cpu."""
    spec["runtime"].update(device=device, precision="bf16" if device == "cuda" else "fp32")
    return spec


def reproducible(device: str) -> dict:
    """assert_close tolerances for two trainings that should give the same weights: bitwise on
    CPU; on CUDA up to bf16 rounding, since some CUDA kernels (atomic adds in the embedding and
    attention backward) are not bitwise reproducible from run to run."""
    return {"rtol": 0, "atol": 0} if device == "cpu" else {"rtol": 1e-2, "atol": 1e-3}


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """A script outside the package (benchmarks/, probes/, tools/) as a module named `name` (its
    file stem by default), its folder importable as when it runs as `python DIR/NAME.py` (the
    runners and benchmarks import their siblings)."""
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def edited(section: dict, **edits) -> dict:
    """A deep copy of a config section with keys replaced; `a__b=v` sets section["a"]["b"]."""
    import copy

    out = copy.deepcopy(section)
    for path, value in edits.items():
        *parents, leaf = path.split("__")
        node = out
        for key in parents:
            node = node[key]
        node[leaf] = value
    return out


def sample_options(task) -> tuple:
    """A task's `lengen sample` options as a parser, and its --help text on one line."""
    import argparse

    parser = argparse.ArgumentParser()
    task.add_sample_arguments(parser)
    return parser, " ".join(parser.format_help().split())


def argparse_namespace(args, **more):
    """A parsed namespace with more attributes (what `lengen sample` adds: --n, --seed)."""
    import argparse

    return argparse.Namespace(**vars(args), **more)


GEOMETRY = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const box = document.querySelector("div.prose") || document.body;
  const title = box.querySelector("h1");
  let minTop = Infinity;
  for (const el of box.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.height > 0) minTop = Math.min(minTop, r.top + window.scrollY);
  }
  const tables = [...box.querySelectorAll("table")].map(t => t.getBoundingClientRect().width);
  document.body.setAttribute("data-geometry", JSON.stringify({
    width: window.innerWidth, height: window.innerHeight,
    title: title ? title.textContent : null,
    titleTop: title ? title.getBoundingClientRect().top : null,
    minTop: minTop, box: box.getBoundingClientRect().width,
    tables: tables.length, narrowestTable: tables.length ? Math.min(...tables) : 0}));
}, 1000));
</script>"""


def browser() -> str | None:
    """A Chromium on PATH (Debian: apt-get install chromium), else None; where CI says a browser
    is required (LENGEN_REQUIRE_BROWSER, .ci/run installs one), its absence fails."""
    import os
    import shutil

    found = next(
        filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None
    )
    if found is None and os.environ.get("LENGEN_REQUIRE_BROWSER"):
        raise AssertionError("LENGEN_REQUIRE_BROWSER is set but no Chromium is on PATH")
    return found


def page_geometry(page: Path, width: int, height: int, tmp: Path) -> dict:
    """What a reader of `page` sees in headless Chromium at width x height, scroll 0: the first
    h1 of its content (div.prose, Snakemake's report; else the body) and its top, the highest
    content's top (negative: above the top of the page, out of reach), the content's width,
    its tables' count and the narrowest one's width."""
    import json
    import re
    import subprocess

    html = page.read_text()
    end = html.rfind("</body>")
    probe = tmp / f"probe_{width}x{height}_{page.name}"
    probe.write_text(html[:end] + GEOMETRY + html[end:])
    flags = [
        browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        "--virtual-time-budget=10000",
    ]
    dom = subprocess.run(
        [*flags, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=180
    ).stdout
    found = re.search(r'data-geometry="([^"]*)"', dom)
    assert found, f"{page}: the geometry probe did not run"
    return json.loads(found[1].replace("&quot;", '"').replace("&amp;", "&"))


def assert_opens_on_its_title(page: Path, tmp: Path, title: str) -> None:
    """At two window sizes the page opens on its title: visible at scroll 0, nothing above the
    top, and its tables as wide as its content (issue 65: report.html opened 7,827 px down,
    its tables in a 512 px column)."""
    for width, height in ((1400, 1000), (800, 600)):
        g = page_geometry(page, width, height, tmp)
        where = f"{page.name} at {width}x{height}: {g}"
        assert g["title"] and title in g["title"], where
        assert 0 <= g["titleTop"] < g["height"] / 2 and g["minTop"] >= 0, where
        assert g["tables"] > 0 and g["narrowestTable"] >= 0.95 * g["box"], where
        assert g["box"] >= 0.6 * width, where


def planned_submissions(dry_run: str) -> tuple[int, set[str]]:
    """The SLURM jobs a dry run through the profile plans (its `Group job` entries, one per job,
    and its jobs outside any group, `all` aside), and the comment prefix each kind has
    (`rule_<group>_...`, `rule_<rule>...`): counted from what the profile groups, not a list
    kept by hand."""
    groups = re.findall(r"Group job (\w+)", dry_run)
    single = [r for r in re.findall(r"^rule (\w+):", dry_run, re.M) if r != "all"]
    kinds = {f"rule_{g}_" for g in groups} | {f"rule_{r}" for r in single}
    return len(groups) + len(single), kinds


def shared_folder(request) -> Path:
    """A folder under /tmp another user of the machine can reach (pytest's tmp_path is root's
    alone, 0700), removed after the test."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(dir="/tmp"))
    folder.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    return folder


def as_second_user(step, user: str = "nobody") -> str:
    """step() run as `user` in a forked child (this process must be root); what it returned, as
    repr, or the error it raised, as `Type: message`."""
    import os
    import pwd

    other = pwd.getpwnam(user)
    read, write = os.pipe()
    if (pid := os.fork()) == 0:  # the child: never returns into pytest
        try:
            os.setgroups([])
            os.setgid(other.pw_gid)
            os.setuid(other.pw_uid)
            result = repr(step())
        except BaseException as err:  # noqa: BLE001 - reported to the parent
            result = f"{type(err).__name__}: {err}"
        os.write(write, result.encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as f:
        return f.read()


def snakemake_cmd(workdir: Path | str, *args: str) -> list[str]:
    """The command that runs Snakemake on the project's Snakefile with `workdir` as its working
    folder, then `args` (targets, options)."""
    snakefile = str(Path(__file__).resolve().parents[1] / "Snakefile")
    return [sys.executable, "-m", "snakemake", "-s", snakefile, "--directory", str(workdir), *args]

#!/usr/bin/env bash
# A tier's from-scratch reference run of one commit, in sittings (docs/results.md, "Making the
# reference"): a git worktree pinned to COMMIT under .runs/ (ignored by git, kept between
# sittings), Snakemake with the CPU kernels pinned as the references are made
# (lengen.core.floats), every sitting's start and end in .runs/<tier>-<commit>.log. Run it again
# after an interruption: finished jobs stay done and each training resumes from its checkpoints.
#
#   bash tools/reference_run.sh COMMIT [CONFIG]        # run (or go on with) the reference run
#   bash tools/reference_run.sh --time COMMIT [CONFIG] # its sittings' wall and CPU time (run_time.py)
#   bash tools/reference_run.sh --refresh COMMIT [CONFIG]  # once it has ended: reference/<tier>/
#
# It runs at normal priority; run anything else on the machine meanwhile under `nice -n 19`, or
# the sittings' time measures the other work too.
#
# CONFIG defaults to config/config.yaml (the default tier). --refresh copies the finished run into
# reference/<tier>/ through lengen.report.refresh (which refuses a run made at more than one
# commit; main's science may have moved on meanwhile), then, for the default tier, rewrites
# README's verdicts from it (tools/readme_verdicts.py) and prints the sittings' time.
set -euo pipefail
{ # the whole script is one block, which bash reads before it runs any of it: an edit of this file
  # while a sitting runs cannot change what the sitting does (bash reads a plain script as it goes:
  # a comment added during the c21ffa7 run's third sitting ended it with rc 127)
cd "$(dirname "$0")/.."
ROOT=$PWD
case ${1:-} in
  --time) shift; TIME=1 ;;
  --refresh) shift; REFRESH=1 ;;
esac
COMMIT=$(git rev-parse --short=7 "${1:?usage: reference_run.sh [--time] COMMIT [CONFIG]}^{commit}")
CONFIG=${2:-config/config.yaml}
TIER=$(python -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['tier'])" "$CONFIG")
RUNS=${RUNS_DIR:-$ROOT/.runs}  # where the worktree and the log live (ignored by git)
WT=$RUNS/ref-$COMMIT
LOG=$RUNS/$TIER-$COMMIT.log
if [[ -n ${TIME:-} ]]; then  # each sitting's wall time, its finished jobs' CPU time, the totals
  exec python "$ROOT/tools/run_time.py" "$LOG" --benchmarks "$WT/results/$TIER/benchmarks" \
    --cores "${CORES:-2}"
fi
if [[ -n ${REFRESH:-} ]]; then
  [[ -d $WT ]] || { echo "$WT: no such run; start it with: bash $0 $COMMIT $CONFIG" >&2; exit 1; }
  # ALLOW_REMOVAL=1: the run lacks files the committed reference has, on purpose (an experiment
  # that moved to another tier: variable assignment, 2026-11-27); the refresh names them first
  (cd "$WT" && PYTHONPATH=$WT/src python -m lengen.report.refresh --configfile "$CONFIG" \
    --project "$ROOT" ${ALLOW_REMOVAL:+--allow-removal})
  if [[ $TIER == default ]]; then
    python tools/readme_verdicts.py --write
  fi
  exec bash "$0" --time "$COMMIT" "$CONFIG"
fi
# the project's environment: the active one, else the checkout's .venv (a sitting started from a
# fresh shell found no snakemake and ended at once, rc 127)
if ! command -v snakemake >/dev/null && [[ -f $ROOT/.venv/bin/activate ]]; then
  source "$ROOT/.venv/bin/activate"
fi
command -v snakemake >/dev/null || {
  echo "no snakemake on PATH: activate the project's environment (README, Install)" >&2; exit 1; }
mkdir -p "$RUNS"
[[ -d $WT ]] || git worktree add -q "$WT" "$COMMIT"
cd "$WT"
export PYTHONPATH=$WT/src
FLOATS=$(python -m lengen.core.floats)  # fails the sitting if the kernels cannot be pinned
eval "$FLOATS"
snakemake --unlock --cores 2 --configfile "$CONFIG" >/dev/null 2>&1 || true
echo "=== start $(date -u +%FT%TZ)" >>"$LOG"
rc=0
# at normal priority: the measured time is the tier's, so other work on the machine runs under
# `nice -n 19` beside it (2d2d629's run, itself under nice 5 beside a foreground that was not:
# its 36 finished trainings took >= 15.1 h of job time where their measured step times give 10.6 h)
snakemake --cores "${CORES:-2}" --keep-going --rerun-incomplete --configfile "$CONFIG" \
  >>"$LOG" 2>&1 || rc=$?
echo "=== end rc=$rc $(date -u +%FT%TZ)" >>"$LOG"
exit $rc
}

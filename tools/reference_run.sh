#!/usr/bin/env bash
# A tier's from-scratch reference run of one commit, in sittings (docs/results.md, "Making the
# new reference"): a git worktree pinned to COMMIT under .runs/ (ignored by git, kept between
# sittings), Snakemake with the CPU kernels pinned as the references are made
# (lengen.core.floats), every sitting's start and end in .runs/<tier>-<commit>.log. Run it again
# after an interruption: finished jobs stay done and each training resumes from its checkpoints.
#
#   bash tools/reference_run.sh COMMIT [CONFIG]        # run (or go on with) the reference run
#   bash tools/reference_run.sh --time COMMIT [CONFIG] # its sittings and their total wall time
#
# CONFIG defaults to config/config.yaml (the default tier). When it ends, refresh from the
# worktree: (cd .runs/ref-<commit> && PYTHONPATH=$PWD/src python -m lengen.report.refresh
#   --configfile CONFIG --project ../..)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
if [[ ${1:-} == --time ]]; then
  shift
  TIME=1
fi
COMMIT=$(git rev-parse --short=7 "${1:?usage: reference_run.sh [--time] COMMIT [CONFIG]}^{commit}")
CONFIG=${2:-config/config.yaml}
TIER=$(python -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['tier'])" "$CONFIG")
RUNS=${RUNS_DIR:-$ROOT/.runs}  # where the worktree and the log live (ignored by git)
WT=$RUNS/ref-$COMMIT
LOG=$RUNS/$TIER-$COMMIT.log
if [[ -n ${TIME:-} ]]; then  # sum the sittings: "=== start T" ... "=== end rc=N T"
  python - "$LOG" <<'PY'
import re, sys
from datetime import datetime
# a sitting ends at its "=== end" line, or (stopped without one: a kill, a session's end) at the
# last timestamp Snakemake logged before the next sitting
text = open(sys.argv[1]).read()
sittings = re.split(r"^(?==== start )", text, flags=re.M)[1:]
total = 0.0
for part in sittings:
    start = datetime.fromisoformat(re.match(r"=== start (\S+)", part)[1].replace("Z", "+00:00"))
    end = re.search(r"^=== end rc=\d+ (\S+)", part, re.M)
    if end:
        stop, how = datetime.fromisoformat(end[1].replace("Z", "+00:00")), "ended"
    else:
        stamps = re.findall(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]", part, re.M)
        stop = datetime.strptime(stamps[-1], "%a %b %d %H:%M:%S %Y").replace(
            tzinfo=start.tzinfo) if stamps else start
        how = "interrupted"
    total += (stop - start).total_seconds()
    print(f"{start:%F %T} -> {stop:%F %T}: {(stop - start).total_seconds() / 3600:.2f} h ({how})")
done = re.findall(r"(\d+) of (\d+) steps \(\d+%\) done", text)
print(f"{len(sittings)} sittings, {total / 3600:.2f} h; jobs done: {'/'.join(done[-1]) if done else '0'}")
PY
  exit 0
fi
mkdir -p "$RUNS"
[[ -d $WT ]] || git worktree add -q "$WT" "$COMMIT"
cd "$WT"
export PYTHONPATH=$WT/src
eval "$(python -m lengen.core.floats)"
snakemake --unlock --cores 2 --configfile "$CONFIG" >/dev/null 2>&1 || true
echo "=== start $(date -u +%FT%TZ)" >>"$LOG"
rc=0
nice -n 5 snakemake --cores "${CORES:-2}" --keep-going --rerun-incomplete --configfile "$CONFIG" \
  >>"$LOG" 2>&1 || rc=$?
echo "=== end rc=$rc $(date -u +%FT%TZ)" >>"$LOG"
exit $rc

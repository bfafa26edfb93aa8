#!/usr/bin/env bash
# The GPU acceptance run (docs/gpu-and-cluster.md, "Measured on GPU"): every check and
# measurement the GPU numbers come from, in one command, on one CUDA machine. Logs and JSON go to
# OUT_DIR.
#
#   [WHEELS=DIR] bash benchmarks/gpu_acceptance.sh OUT_DIR [checks|train|all|STEP,STEP,...]
#
# With 15 minutes of device time (one lent session, start-up included) and 600 s a command, run
# the one call `lease` (below: the CUDA tests, the trainer's fused step, the gpu-smoke tier whole,
# fused_agreement, within LEASE_BUDGET seconds). The
# earlier lease plan, `fused_profile,fused_eager,fused_compile` (~8 min), timed the bare fused
# step: where its time goes (its kernels, with the trainers' fused AdamW), then the fused step
# at R = 1-16, eager and compiled (the eager ones measured on an H200 2026-11-26:
# benchmarks/measured/2026-11-26-h200-lease3 and -lease3b, the latter with the bias inside the
# batched matmul). `fused_grid` (Fig. 2's PPC grid as one fused group; its
# 1,500-step probe took 496 s with its 16 model files and scoring:
# benchmarks/measured/2026-11-26-h200-lease2) wants a lease of its own. A tree copied without its
# .git: `git archive C | tar x -C DIR && git rev-parse C > DIR/COMMIT`; COMMIT is exported as
# LENGEN_SOURCE_COMMIT, the commit every row and JSON records.
#
# Each step has a time limit (a stuck step does not eat the others'); TRAIN_LIMIT (seconds)
# bounds each training job (GPU_SMOKE_LIMIT, AGREE_LIMIT, JAGGED_LIMIT, GROUP_EAGER_LIMIT,
# GROUP_COMPILE_LIMIT the steps so named). Steps: pytest_cuda throughput_paper step_time_paper step_time_gpu
# loo_paper decode_paper prefetch fused decode_fused loss_memory (the checks), train and
# fused_grid.
# checks (~10 min on one H100): the tests with a GPU path on CUDA; the paper's 12 x 1024 synthetic
#   model's training throughput and MFU (eager and torch.compile / CUDA graphs); seconds per step
#   of every training-job kind of the paper and gpu tiers through the trainer's own step, the
#   1.3B language model's DeepSpeed step with its micro-batch included, and each tier's wall time
#   from them; the leave-one-out batch of the 1.3B model; the static KV cache's decoding; the
#   trainer's step with and without the batch-making worker (prefetch); the 1.3B micro-batch's
#   loss memory in one piece and in chunks.
# train: the gpu tier's sparse-parity model at K_train = 8 and its PPC parity model at jump 2,
#   trained and scored by the probe runners (entries GPU_* in probes/*.yaml: set their steps from
#   the step-time measurement first), rows appended to the probe tables, copied to OUT_DIR.
# fused_grid: Fig. 2's PPC grid (jumps 1-4 x 4 runs) of the gpu tier's model trained as one fused
#   group and each member scored (probe GPU_PS_ppc_fused: set its steps from fused_eager's step
#   time first), 16 rows appended to probes/scratchpad_probes.csv, copied to OUT_DIR.
# gpu_smoke: the gpu-smoke tier whole (config/gpu-smoke.yaml: every branch of the gpu tier's DAG,
#   fused groups of the paper's 12 x 1024 model, 200 steps, evaluation, figures, REPORT, MLflow;
#   goal <= 5 min on one H100), from scratch in GPU_SMOKE_DIR; its reports/gpu-smoke/ (to
#   commit as reference/gpu-smoke/), every job's benchmark and log in OUT_DIR/gpu_smoke.tgz.
#   Needs snakemake beside the project (WHEELS on an offline host: tools/wheelhouse.sh has it).
# fused_agreement: after gpu_smoke, its trained PPC members of one fused group decoded alone and
#   fused on the GPU (benchmarks/fused_agreement.py): per member and length, the share of whole
#   generations that agree and the exact match each way.
# jagged: one layer's linears of the gpu tier's PPC group as grouped GEMMs over each run's own
#   tokens (torch._grouped_mm) against the padded batched matmul (benchmarks/jagged.py, ~1 min).
# group_step: the trainer's fused step (benchmarks/group_step.py), R = 8 and 16, eager with its
#   profile (~2 min; benchmarks/measured/2026-11-27-h100); group_step_compile: compiled at R = 8
#   (its compilation did not finish in 90 s there).
# lease: the one call of a 15-minute lease whose command stops at 600 s (start-up, 1-3 min, comes
#   before it). In order, each archived (ARCHIVE) as it ends: pytest_cuda (the CUDA tests,
#   `pytest -m device`), group_step (the trainer's fused step in torch_autocast mode, R = 8, the
#   step every gpu-tier time estimate needs), gpu_smoke (the tier whole, the fused group that
#   fused_agreement decodes prioritized), fused_agreement. LEASE_BUDGET (default 530 s, from the
#   script's first line, the wheels' install included) is split so that each step's limit (its
#   kill included) is its cap or what the budget leaves after the caps of the steps still to come,
#   whichever is less; a step left under 15 s is not started and says so (status 1). The whole
#   call ends by ~535 s: 60 s or more to spare in a 600 s command. Run it with WHEELS from
#   tools/wheelhouse.sh and ARCHIVE=FILE (docs/gpu-and-cluster.md, "The lease call").
# Every call writes OUT_DIR/versions.txt: each package of constraints.txt installed, its version
# and the lock's, and prints the ones that differ (a GPU image's own torch, numpy, ...): the
# versions a lease tested. With WHEELS, the wheelhouse's packages (the lock's versions, DeepSpeed
# included; torch too where its wheel is put there) come first on the path.
set -uo pipefail
START=$SECONDS  # the lease's budget counts from here, the wheels' install included
OUT=${1:?usage: gpu_acceptance.sh OUT_DIR [checks|train|all|STEP,...]}
PART=${2:-all}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
if [[ -n ${WHEELS:-} ]]; then  # an offline host with a PyTorch image: the project's other
  # dependencies from a wheelhouse (bash tools/wheelhouse.sh WHEELS 3.12, made where pip works)
  python -m pip install -q --no-index --no-deps --no-compile --target /tmp/lengen-site \
    "$WHEELS"/*.whl || exit 1
  export PYTHONPATH="/tmp/lengen-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [[ -f COMMIT && -z ${LENGEN_SOURCE_COMMIT:-} ]]; then  # a tree copied without its .git
  # (git archive; COMMIT written beside it): the commit every row and JSON records
  export LENGEN_SOURCE_COMMIT=$(<COMMIT)
fi
export MLFLOW_DISABLE_TELEMETRY=true
status=0
pack() {  # ARCHIVE=FILE: OUT_DIR as one .tgz, made anew after every step (a host that gives back
  # only a few files, or cuts the command at its limit, still returns each finished step's files)
  [[ -n ${ARCHIVE:-} ]] || return 0
  tar czf "$ARCHIVE.part" -C "$(dirname "$OUT")" "$(basename "$OUT")" && mv "$ARCHIVE.part" "$ARCHIVE"
}
step() {  # step NAME SECONDS COMMAND...: run (stopped after SECONDS, its kill included), log to
  local name=$1 limit=$2  # OUT/NAME.log, remember a failure, go on
  shift 2
  echo "== $name (limit $limit s): $*" | tee "$OUT/$name.log"
  local t0=$SECONDS rc=0
  timeout --kill-after=10 "$((limit > 20 ? limit - 10 : limit))" "$@" >>"$OUT/$name.log" 2>&1 || rc=$?
  if ((rc)); then
    echo "FAILED ($rc; 124: past its $limit s)" | tee -a "$OUT/$name.log"
    status=1
  fi
  echo "== $name: $((SECONDS - t0)) s" | tee -a "$OUT/$name.log"
  tail -n 25 "$OUT/$name.log"
  pack
  return "$rc"
}

{
  date -u +%FT%TZ
  python -c "from lengen.core.provenance import git_commit; print(git_commit())"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, torch.cuda.get_device_name())"
} | tee "$OUT/machine.txt"
# the versions this call tests, against the lock (constraints.txt)
python - "$OUT/versions.txt" <<'PY'
import re, sys
from importlib import metadata
key = lambda n: re.sub(r"[-_.]+", "-", n).lower()  # noqa: E731
text = open("constraints.txt").read()
lock = {key(m[1]): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M)}
rows, differ = [], []
for name, want in sorted(lock.items()):
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        continue
    same = have.split("+")[0] == want.split("+")[0]
    rows.append(f"{name} {have} (lock {want}{'' if same else ': DIFFERS'})")
    differ += [] if same else [rows[-1]]
open(sys.argv[1], "w").write("\n".join(rows) + "\n")
main = [r for r in rows if r.split()[0] in ("torch", "deepspeed", "numpy", "transformers")]
print("versions tested:", "; ".join(main) or "none of the lock's")
print(f"{len(differ)} of {len(rows)} installed packages differ from constraints.txt"
      + (": " + "; ".join(differ) if differ else ""))
PY

want() {  # want STEP: asked for by PART (all, its group, or a comma list naming it)
  [[ $PART == all || ,$PART, == *",$1,"* ]] && return 0
  case $1 in
    pytest_cuda | throughput_paper | step_time_paper | step_time_gpu | loo_paper | decode_paper | \
      prefetch | fused | decode_fused | loss_memory)
      [[ $PART == checks ]] ;;
    train | fused_grid | fused_profile | gpu_smoke | group_step | group_step_compile)
      [[ $PART == "$1" ]] ;;
    *) return 1 ;;
  esac
}

limit() {  # limit CAP LATER: seconds for the next step of the lease: its CAP, or what
  # LEASE_BUDGET leaves once LATER seconds are kept for the steps after it
  local left=$(( ${LEASE_BUDGET:-530} - (SECONDS - START) - $2 ))
  echo $(( left < $1 ? left : $1 ))
}
lease_step() {  # lease_step NAME CAP LATER COMMAND...: a step of the lease within its share
  local name=$1 cap=$2 later=$3
  shift 3
  local s
  s=$(limit "$cap" "$later")
  if ((s < 15)); then
    echo "== $name: not started, $s s left of LEASE_BUDGET for it" | tee "$OUT/$name.log"
    status=1
    pack
    return 1
  fi
  step "$name" "$s" "$@"
}
smoke_work=${GPU_SMOKE_DIR:-/tmp/lengen-gpu-smoke}
agreement_group() {  # the fused-group marker of the gpu-smoke PPC runs of jump 1 (fused_agreement's)
  python - <<'PY'
from lengen.config import plan
from lengen.config.config import load
cfg = load("config/gpu-smoke.yaml")
run = plan.Run("parity_scratchpad", "ppc", 1, 0)
print(plan.trained(cfg, run))
PY
}
if [[ $PART == lease ]]; then
  # caps (s): the CUDA tests 100, the fused step 75, the tier 320, the agreement 45
  lease_step pytest_cuda 100 440 python -m pytest -q -p no:cacheprovider --device cuda -m device
  lease_step group_step_eager 75 365 python benchmarks/group_step.py --config config/gpu.yaml \
    --device cuda --groups parity_scratchpad/ppc sparse_parity/neox --runs 8 --steps 8 \
    --warmup 3 --profile 3 --json "$OUT/group_step_eager.json"
  rm -rf "$smoke_work" && mkdir -p "$smoke_work"
  marker=$(agreement_group)
  # the tier's disk check counts four groups' checkpoints at their end at once (~47 GB, a bound):
  # on a lent machine's 64 GiB it would refuse a run that fits; the disk is recorded instead
  df -h "$smoke_work" >> "$OUT/machine.txt" 2>&1
  lease_step gpu_smoke 320 45 env LENGEN_DISK_CHECK=0 python -m snakemake -s "$PWD/Snakefile" \
    --directory "$smoke_work" --cores all --configfile "$PWD/config/gpu-smoke.yaml" \
    --prioritize "$marker"
  df -h "$smoke_work" >> "$OUT/machine.txt" 2>&1
  tar czf "$OUT/gpu_smoke.tgz" -C "$smoke_work" reports/gpu-smoke results/gpu-smoke/benchmarks \
    results/gpu-smoke/logs 2>/dev/null
  pack
  lease_step fused_agreement 45 0 python benchmarks/fused_agreement.py \
    --config config/gpu-smoke.yaml --device cuda --json "$OUT/fused_agreement.json" \
    --models "$smoke_work"/results/gpu-smoke/parity_scratchpad/ppc/k1/seed*/model.pt
  echo "== lease: $((SECONDS - START)) s of ${LEASE_BUDGET:-530}" | tee -a "$OUT/machine.txt"
  pack
  exit $status
fi

want pytest_cuda && step pytest_cuda 180 python -m pytest -q -p no:cacheprovider --device cuda -m device
want throughput_paper && step throughput_paper 150 python benchmarks/throughput.py \
  --config config/paper.yaml --device cuda --steps 100 --compile
want step_time_paper && step step_time_paper 240 python benchmarks/step_time.py \
  --config config/paper.yaml --device cuda --steps 5 --warmup 2 --lm-steps 2 \
  --json "$OUT/step_time_paper.json"
want step_time_gpu && step step_time_gpu 180 python benchmarks/step_time.py \
  --config config/gpu.yaml --device cuda --steps 3 --warmup 2 --lm-steps 3 \
  --json "$OUT/step_time_gpu.json"
want loo_paper && step loo_paper 90 python benchmarks/loo.py --config config/paper.yaml --device cuda
want decode_paper && step decode_paper 120 python benchmarks/decode.py --config config/paper.yaml \
  --device cuda
for fetch in off on; do  # the same kinds, batches made in the step or ahead in a worker
  want prefetch && step "prefetch_$fetch" 180 python benchmarks/step_time.py \
    --config config/paper.yaml --device cuda --steps 20 --warmup 3 --prefetch "$fetch" \
    --only sparse_parity/neox parity_scratchpad/ppc/k2 variable_assignment/ppc/d3 \
    --json "$OUT/prefetch_$fetch.json"
done
for mode in eager compile; do  # fused groups of the paper's 12 x 1024 model (issue 45, item 6)
  (want fused || want "fused_$mode") && step "fused_$mode" 300 python benchmarks/fused.py --device cuda --layers 12 \
    --width 1024 --heads 16 --batch 64 --length 25 --runs 1 4 8 16 --bf16 \
    $([[ $mode == compile ]] && echo --compile) --json "$OUT/fused_$mode.json"
done
# where the fused step's time goes (its MFU saturates at ~14%: issue 45), 8 runs of the paper's
# model, eager
want fused_profile && step fused_profile 120 python benchmarks/fused_profile.py --device cuda \
  --layers 12 --width 1024 --heads 16 --batch 64 --runs 8 --bf16 --json "$OUT/fused_profile.json"
# the trainer's fused step (lengen.train.group.Fused: DeepSpeed engine, per-run clipping, fused
# AdamW, batches made ahead) of the gpu tier's first PPC-parity and sparse-parity groups, R = 8
# and 16, eager with a profile of its time split, then compiled at R = 8 (issue 63, item 5 b, c)
want group_step && step group_step_eager "${GROUP_EAGER_LIMIT:-110}" python benchmarks/group_step.py \
  --config config/gpu.yaml --device cuda --runs 8 16 --steps 8 --warmup 3 --profile 3 \
  --json "$OUT/group_step_eager.json"
want group_step_compile && step group_step_compile "${GROUP_COMPILE_LIMIT:-180}" python \
  benchmarks/group_step.py --config config/gpu.yaml --device cuda --groups parity_scratchpad/ppc \
  --runs 8 --compile default --steps 12 --warmup 3 --json "$OUT/group_step_compile.json"
# a fused group's evaluation: 8 runs of the gpu tier's PPC parity model decoded one by one and
# in one pass, at its longest test length (issue 45, item 3)
want decode_fused && step decode_fused 150 python benchmarks/decode.py --config config/gpu.yaml \
  --device cuda --fused 8
want loss_memory && step loss_memory 180 python benchmarks/loss_memory.py --device cuda \
  --dtype bf16 --tokens 16384 --d-model 2048 --chunks 4096 1024 --json "$OUT/loss_memory.json"

if want train; then  # the two models side by side on the one GPU (each is launch-bound)
  step train_sp_k8 "${TRAIN_LIMIT:-1800}" python probes/sparse_parity.py run GPU_K8_neox &
  sp=$!
  step train_ppc_j2 "${TRAIN_LIMIT:-1800}" python probes/scratchpad.py run GPU_PS_ppc_j2 &
  ppc=$!
  wait $sp || status=1
  wait $ppc || status=1
  cp probes/sparse_parity_probes.csv probes/scratchpad_probes.csv "$OUT/"
fi
if want fused_grid; then
  step fused_grid "${TRAIN_LIMIT:-600}" python probes/scratchpad.py run "${GRID_PROBE:-GPU_PS_ppc_fused_1500}"
  cp probes/scratchpad_probes.csv "$OUT/"
fi
if want gpu_smoke; then
  work=${GPU_SMOKE_DIR:-/tmp/lengen-gpu-smoke}
  rm -rf "$work" && mkdir -p "$work"
  step gpu_smoke "${GPU_SMOKE_LIMIT:-420}" python -m snakemake -s "$PWD/Snakefile" \
    --directory "$work" --cores all --configfile "$PWD/config/gpu-smoke.yaml"
  # one archive (a lent machine gives back a few files): reports/gpu-smoke (to commit as
  # reference/gpu-smoke/), every job's benchmark and log
  tar czf "$OUT/gpu_smoke.tgz" -C "$work" reports/gpu-smoke results/gpu-smoke/benchmarks \
    results/gpu-smoke/logs 2>/dev/null
  pack
fi
if want fused_agreement; then  # gpu_smoke's trained PPC members of jump 1 (one fused group),
  # each decoded alone and fused on this GPU (issue 63, item 5 d): needs gpu_smoke run first
  work=${GPU_SMOKE_DIR:-/tmp/lengen-gpu-smoke}
  step fused_agreement "${AGREE_LIMIT:-120}" python benchmarks/fused_agreement.py --config config/gpu-smoke.yaml \
    --device cuda --json "$OUT/fused_agreement.json" \
    --models "$work"/results/gpu-smoke/parity_scratchpad/ppc/k1/seed*/model.pt
fi
# the padding-free fused linear (issue 63, item 2): one layer's four linears of the gpu tier's PPC
# parity group as grouped GEMMs over each run's own tokens against today's padded bmm
want jagged && step jagged "${JAGGED_LIMIT:-120}" python benchmarks/jagged.py --config config/gpu.yaml \
  --group parity_scratchpad/ppc --device cuda --dtype bf16 --samples 12 --json "$OUT/jagged.json"
pack
exit $status

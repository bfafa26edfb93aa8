#!/usr/bin/env bash
# The GPU acceptance run (README, "Measured on GPU"): every check and measurement the README's
# GPU numbers come from, in one command, on one CUDA machine. Logs and JSON go to OUT_DIR.
#
#   bash benchmarks/gpu_acceptance.sh OUT_DIR [checks|train|all]
#
# checks (~10 min on one H100): the tests with a GPU path on CUDA; the paper's 12 x 1024 synthetic
#   model's training throughput and MFU (eager and torch.compile / CUDA graphs); seconds per step
#   of every training-job kind of the paper and gpu tiers through the trainer's own step, the
#   1.3B language model's DeepSpeed step with its micro-batch included, and each tier's wall time
#   from them; the leave-one-out batch of the 1.3B model.
# train: the gpu tier's sparse-parity model at K_train = 8 and its PPC parity model at jump 2,
#   trained and scored by the probe runners (entries GPU_* in probes/*.yaml: set their steps from
#   the step-time measurement first), rows appended to the probe tables, copied to OUT_DIR.
set -uo pipefail
OUT=${1:?usage: gpu_acceptance.sh OUT_DIR [checks|train|all]}
PART=${2:-all}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export MLFLOW_DISABLE_TELEMETRY=true
status=0
step() {  # step NAME COMMAND...: run, log to OUT/NAME.log, remember a failure, go on
  local name=$1
  shift
  echo "== $name: $*" | tee "$OUT/$name.log"
  local t0=$SECONDS
  "$@" >>"$OUT/$name.log" 2>&1 || { echo "FAILED ($?)" | tee -a "$OUT/$name.log"; status=1; }
  echo "== $name: $((SECONDS - t0)) s" | tee -a "$OUT/$name.log"
  tail -n 25 "$OUT/$name.log"
}

{
  date -u +%FT%TZ
  git rev-parse HEAD 2>/dev/null || echo "commit: not a git checkout"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, torch.cuda.get_device_name())"
} | tee "$OUT/machine.txt"

if [[ $PART == checks || $PART == all ]]; then
  step pytest_cuda python -m pytest -q -p no:cacheprovider --device cuda -m device
  step throughput_paper python benchmarks/throughput.py --config config/paper.yaml --device cuda \
    --steps 100 --compile
  step step_time_paper python benchmarks/step_time.py --config config/paper.yaml --device cuda \
    --steps 5 --warmup 2 --json "$OUT/step_time_paper.json"
  step step_time_gpu python benchmarks/step_time.py --config config/gpu.yaml --device cuda \
    --steps 10 --warmup 3 --json "$OUT/step_time_gpu.json"
  step loo_paper python benchmarks/loo.py --config config/paper.yaml --device cuda
fi

if [[ $PART == train || $PART == all ]]; then
  step train_sp_k8 python probes/sparse_parity.py run GPU_K8_neox
  step train_ppc_j2 python probes/scratchpad.py run GPU_PS_ppc_j2
  cp probes/sparse_parity_probes.csv probes/scratchpad_probes.csv "$OUT/"
fi
exit $status

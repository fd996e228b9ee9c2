#!/usr/bin/env bash
# Issue 49's first call on a lent GPU, in at most 9 minutes: the training steps measured (about
# 3 minutes), then the literature's seeds packed on the one GPU with what time is left.
#   . .whl/env.sh || exit; OUT=$OUT bash benchmarks/gpu.sh            # the call (carry .whl and .gpu-data)
#   bash benchmarks/gpu.sh dry                                         # here: every command at tiny settings, on the CPU
# Writes under $OUT: one log a command, times.txt, the sweep's results.md/csv; runs in /tmp/runs.
set -uo pipefail
out=$(realpath -m "${OUT:-gpu-out}")
mkdir -p "$out"
cd "$(dirname "$0")/.."
budget=${BUDGET:-510}  # seconds the whole script may take (the call's 9 minutes, less the install)
start=$SECONDS

step() {  # name, seconds (0: no limit), command...: its output in $out/<name>.log; exit code and wall time in times.txt
    local name=$1 limit=$2 t=$SECONDS; shift 2
    if [ "$limit" -gt 0 ]; then timeout --signal=INT "$limit" "$@" > "$out/$name.log" 2>&1; else "$@" > "$out/$name.log" 2>&1; fi
    echo "$name rc=$? $((SECONDS - t))s: $*" | tee -a "$out/times.txt"
}
left() { echo $((budget - (SECONDS - start))); }

if [ "${1:-}" = dry ]; then  # the same commands, tiny and on the CPU: typos found here, not on the GPU's clock
    steps=(--preset demo --steps 2 --warmup 1 --device cpu); tiny=(trainer.max_steps=4 train.cpu_threads=1
        "sweep.launcher={type: local, parallel: 2, gpus_per_trial: 0}" train.average_last=2 decode.beam=1 decode.max_len_b=2)
else
    steps=(--steps 20 --warmup 5); tiny=()
fi

cd benchmarks
nvidia-smi --query-gpu=name,memory.total --format=csv > "$out/gpu.txt" 2>&1
if [ "${1:-}" = dry ]; then
    step steps-eager 120 python3 train_step.py "${steps[@]}" --no-marian
    step steps-compiled 300 python3 train_step.py "${steps[@]}" --compile --no-marian
    step steps-pipeline 120 python3 train_step.py --pipeline "${steps[@]}"
else
    step base-eager 60 python3 train_step.py --preset base "${steps[@]}" --no-marian
    step base-compiled 90 python3 train_step.py --preset base "${steps[@]}" --compile --no-marian --profile 10
    step m30k-eager 30 python3 train_step.py --preset multi30k --steps 30 --warmup 5 --no-marian
    step m30k-static-cudagraphs 90 python3 train_step.py --preset multi30k --steps 30 --warmup 5 --compile --static-shapes 6 --mode reduce-overhead --no-marian --profile 10
    step m30k-pipeline 60 python3 train_step.py --pipeline --preset multi30k --steps 30 --warmup 10
fi
cd ..
# the seeds: six trials packed on the GPU until the budget ends; what finished is scored on test2016
step seeds-sweep "$(( $(left) - 40 ))" aiayn sweep experiments/multi30k/seeds.sweep.yaml "${tiny[@]}" --runs /tmp/runs
step seeds-results 60 aiayn results /tmp/runs/multi30k-seeds --split test
cp /tmp/runs/multi30k-seeds/results.* "$out/" 2>/dev/null
echo "total $((SECONDS - start))s" | tee -a "$out/times.txt"

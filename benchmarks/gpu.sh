#!/usr/bin/env bash
# Issue 49's call on a lent GPU, in at most 9 minutes: the training steps measured, then the
# literature's seeds packed on the one GPU with what time is left (trainer.max_time guards them).
#   . .whl/env.sh || exit; OUT=$OUT bash benchmarks/gpu.sh            # the call (carry .whl and .gpu-data)
#   bash benchmarks/gpu.sh dry                                         # here: every command at tiny settings, on the CPU
#   SEEDS="1 2 3" bash benchmarks/gpu.sh                               # all six trials (default: seed 1 of each variant)
#   STEPS=0 SWEEP=graphs bash benchmarks/gpu.sh                        # issue 51: graphs.sweep.yaml's trials, no step measurements
# Under $OUT: times.txt, summary.txt and logs.tgz (every command's log, each trial's results.json,
# the sweep's results.md/csv), remade after each command: the call returns at most 8 files.
set -uo pipefail
out=$(realpath -m "${OUT:-gpu-out}")
work=$(mktemp -d)
mkdir -p "$out"
cd "$(dirname "$0")/.."
budget=${BUDGET:-540}  # seconds the whole script may take (the call's limit, less the install)
start=$SECONDS

pack() { tar czf "$out/logs.tgz" -C "$work" . 2>/dev/null; cp "$work/times.txt" "$out/" 2>/dev/null; }
step() {  # name, seconds (0: no limit), command...: its output in logs/<name>.log; exit code and wall time in times.txt
    local name=$1 limit=$2 t=$SECONDS; shift 2
    if [ "$limit" -le 0 ]; then echo "$name skipped: no time left" | tee -a "$work/times.txt"; return; fi
    timeout --signal=INT --kill-after=15 "$limit" "$@" > "$work/$name.log" 2>&1
    echo "$name rc=$? $((SECONDS - t))s: $*" | tee -a "$work/times.txt"
    pack
}
left() { echo $((budget - (SECONDS - start))); }
hms() { printf '00:%02d:%02d:%02d' $(($1 / 3600)) $(($1 % 3600 / 60)) $(($1 % 60)); }

if [ "${1:-}" = dry ]; then  rm -rf /tmp/runs/multi30k-seeds /tmp/runs/multi30k-graphs  # the same commands, tiny and on the CPU: typos found here, not on the GPU's clock
    steps=(--preset demo --steps 2 --warmup 1 --device cpu); tiny=(trainer.max_steps=4 train.cpu_threads=1
        "sweep.launcher={type: local, parallel: 2, gpus_per_trial: 0}" train.average_last=2 decode.beam=1 decode.max_len_b=2)
else
    steps=(--steps 20 --warmup 5); tiny=()
fi

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c "import torch, lightning; print(torch.__version__, lightning.__version__)"; } > "$work/gpu.log" 2>&1
cd benchmarks
if [ "${STEPS:-1}" = 0 ]; then
    :
elif [ "${1:-}" = dry ]; then
    step steps-eager 120 python3 train_step.py "${steps[@]}" --no-marian
    step steps-compiled 300 python3 train_step.py "${steps[@]}" --compile --no-marian --profile 10
    step steps-pipeline 120 python3 train_step.py --pipeline "${steps[@]}"
else
    step base-eager 40 python3 train_step.py --preset base "${steps[@]}" --no-marian
    step base-compiled 90 python3 train_step.py --preset base "${steps[@]}" --compile --no-marian --profile 10
    step m30k-eager 25 python3 train_step.py --preset multi30k --steps 30 --warmup 5 --no-marian
    step m30k-static-cudagraphs 90 python3 train_step.py --preset multi30k --steps 30 --warmup 5 --compile --static-shapes 6 --mode reduce-overhead --no-marian --profile 10
    step m30k-pipeline 45 python3 train_step.py --pipeline --preset multi30k --steps 30 --warmup 10
fi
cd ..
# the sweep (SWEEP: seeds, or graphs): the trials packed on the GPU, each stopped by trainer.max_time where 8000 steps do not fit
# (then averaged, validated and scored as a finished run), scored on test2016 with what is left
seeds=${SEEDS:-1}
from=experiments/multi30k/${SWEEP:-seeds}.sweep.yaml
name=$(sed -n 's/^name: *//p' "$from")
sweep=experiments/multi30k/_gpu-${SWEEP:-seeds}.sweep.yaml
sed "s/^seeds: .*/seeds: [${seeds// /, }]/" "$from" > "$sweep"
train_s=$(( $(left) - 110 ))
[ "${1:-}" = dry ] && train_s=120
step sweep "$(( $(left) - 45 ))" aiayn sweep "$sweep" "${tiny[@]}" "trainer.max_time=$(hms $((train_s > 60 ? train_s : 60)))" --runs /tmp/runs
step results "$(( $(left) - 5 ))" aiayn results /tmp/runs/$name --split test
rm -f "$sweep"
mkdir -p "$work/runs"
for r in /tmp/runs/$name/*/version_0; do [ -f "$r/results.json" ] && cp "$r/results.json" "$work/runs/$(basename "$(dirname "$r")").json"; done
cp /tmp/runs/$name/results.* "$work/" 2>/dev/null
echo "total $((SECONDS - start))s" | tee -a "$work/times.txt"
# what the reply's tail shows: each step's table, the trials' steps and BLEU, the sweep's table
for f in "$work"/*.log; do echo "== $(basename "$f")"; grep -E "^\||^preset|^multi30k|^base|^whole|%|rc=|Error|error" "$f" | grep -v "^|---" | tail -25; done > "$out/summary.txt"
for j in "$work"/runs/*.json; do [ -f "$j" ] && python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1], {k: r.get(k) for k in ('steps', 'bleu', 'ppl', 'wall_time_s', 'tokens_per_s')})" "$j"; done >> "$out/summary.txt"
cat "$work/results.md" >> "$out/summary.txt" 2>/dev/null
pack
cat "$out/summary.txt" | cut -c1-220 | tail -150

#!/usr/bin/env bash
# The measurements issue 23 asks of a GPU, in calls that each fit the device tool's 10 minutes.
# On a GPU machine, from the project's root, with the project installed and $AIAYN_DATA holding
# multi30k/ (`aiayn data multi30k $AIAYN_DATA/multi30k`); each line is one call of at most 10 minutes
# (`. .whl/env.sh || exit;` first on our lent machines):
#   bash benchmarks/gpu_issue23.sh steps          # train_step.py: base and multi30k, eager, compiled, profile
#   bash benchmarks/gpu_issue23.sh static         # multi30k: static shapes + CUDA graphs, raw and end to end
#   bash benchmarks/gpu_issue23.sh base-default   # multi30k/base.yaml as shipped: train, evaluate test2016
#   bash benchmarks/gpu_issue23.sh base-fast      # the same with static shapes + reduce-overhead (same seed)
#   ... tiny-default, tiny-fast: multi30k/tiny.yaml (the literature's 41.02 lowercased BLEU)
#   bash benchmarks/gpu_issue23.sh tiny-seed 2    # tiny.yaml with train.seed=2 (issue 33: the seed's share of the gap)
#   bash benchmarks/gpu_issue23.sh tiny-no-eos 1  # tiny.yaml without fairseq's source </s> (model.source_eos=false), seed 1
# Each writes under $OUT (default ./gpu-out): one log per command, times.txt, results-<label>.json;
# the runs go to /tmp/runs.
set -uo pipefail
out=$(realpath -m "${OUT:-gpu-out}")
mkdir -p "$out"
cd "$(dirname "$0")/.."
fast=(data.static_shapes.num_buckets=6 train.compile=reduce-overhead)

step() {  # name, command...: the command's output in $out/<name>.log, its exit code and wall time in $out/times.txt
    local name=$1 start=$SECONDS; shift
    "$@" > "$out/$name.log" 2>&1
    echo "$name rc=$? $((SECONDS - start))s: $*" | tee -a "$out/times.txt"
}

recipe() {  # experiment, label, overrides...: train, then evaluate test2016 (sacreBLEU and lowercased BLEU)
    local experiment=$1 label=$2; shift 2
    step "train-$label" aiayn train "$experiment" "$@" --runs "/tmp/runs/$label"
    local run
    run=$(ls -d /tmp/runs/"$label"/*/version_* | tail -1)
    step "evaluate-$label" aiayn evaluate "$run" --split test --lc-bleu --json
    cp "$run/results.json" "$out/results-$label.json"
}

case ${1:-} in
steps)  # about 5 minutes on an H100
    cd benchmarks
    step base-eager python3 train_step.py --preset base --steps 20 --warmup 5
    step base-compiled python3 train_step.py --preset base --steps 20 --warmup 5 --compile --no-marian
    step base-profile python3 train_step.py --preset base --steps 5 --warmup 3 --no-marian --profile 20
    step m30k-compiled python3 train_step.py --preset multi30k --steps 30 --warmup 5 --compile --no-marian
    step m30k-pipeline python3 train_step.py --pipeline --preset multi30k --steps 30 --warmup 10
    ;;
static)  # six shapes to compile, twice
    cd benchmarks
    step m30k-static-cudagraphs python3 train_step.py --preset multi30k --steps 30 --warmup 5 --compile --static-shapes 6 --mode reduce-overhead --no-marian
    step m30k-pipeline-static python3 train_step.py --pipeline --preset multi30k --steps 30 --warmup 10 --compile --static-shapes 6 --mode reduce-overhead
    ;;
base-default) recipe experiments/multi30k/base.yaml base-default ;;
base-fast) recipe experiments/multi30k/base.yaml base-fast "${fast[@]}" ;;
tiny-default) recipe experiments/multi30k/tiny.yaml tiny-default ;;
tiny-fast) recipe experiments/multi30k/tiny.yaml tiny-fast "${fast[@]}" ;;
tiny-seed) recipe experiments/multi30k/tiny.yaml "tiny-s${2:-1}" "train.seed=${2:-1}" ;;
tiny-no-eos) recipe experiments/multi30k/tiny.yaml "tiny-no-eos-s${2:-1}" model.source_eos=false "train.seed=${2:-1}" ;;
*)
    echo "usage: bash benchmarks/gpu_issue23.sh steps|static|base-default|base-fast|tiny-default|tiny-fast|tiny-seed SEED|tiny-no-eos SEED" >&2
    exit 2
    ;;
esac

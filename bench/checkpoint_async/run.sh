#!/usr/bin/env bash
# Asynchronous checkpoints against synchronous ones: GPT-2 124M on the CPU (the NVMe bench's
# model and batch, bench/nvme/gpt2-124m.yaml, without offload) saved every 30 steps over 90,
# three runs in the same session: no checkpoints, train.checkpoint_async false and true. How
# long training stands still per save comes from the run's own "checkpoint: ... (X s)" lines
# (for asynchronous saves, the first, which allocates the staging buffers, apart from the later
# ones, which copy into them again);
# the throughput while a background write runs from the mean step time against the run
# without checkpoints. Prints a markdown table (docs/benchmarks.md).
#   bash bench/checkpoint_async/run.sh [THREADS]
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
cfg=bench/nvme/gpt2-124m.yaml
rounds=${FRUGAL_BENCH_ROUNDS:-2}
common=(--set strategy.offload.optimizer=false --set train.max_steps=90 --set train.save_final=false
        --set train.keep_last=1 --set run.threads="$threads")
median() { .venv/bin/python -c 'import statistics,sys; print(statistics.median(map(float, sys.argv[1:])))' "$@"; }
step_mean() {
  .venv/bin/python - "$1" <<'PY'
import json, statistics, sys
t = [json.loads(l)["step_time_s"] for l in open(sys.argv[1]) if '"loss"' in l]
print(statistics.mean(t[2:]))  # the mean: every step's share of the write's cost
PY
}
# held LOG [FROM]: the median seconds the saves from the FROM-th on (1: all) held training.
# (the "(X s)" or "copied in X s" figures); first LOG: the first save's.
saves() { grep -o "checkpoint: .*" "$1" | grep -o "[0-9][0-9.]* s" | cut -d" " -f1; }
held() { saves "$1" | tail -n +"${2:-1}" | xargs .venv/bin/python -c "import statistics,sys; print(statistics.median(map(float, sys.argv[1:])))"; }
first() { saves "$1" | head -1; }

none=() sync_held=() async_first=() async_held=() sync_step=() async_step=()
for round in $(seq "$rounds"); do
  build/bin/frugal train "$cfg" --set run.dir="$tmp" --set run.name="none-$round" "${common[@]}" \
    --set train.checkpoint_every=0 >"$tmp/none-$round.log" 2>&1
  none+=("$(step_mean "$tmp/none-$round/metrics.jsonl")")
  for mode in sync async; do
    build/bin/frugal train "$cfg" --set run.dir="$tmp" --set run.name="$mode-$round" "${common[@]}" \
      --set train.checkpoint_every=30 --set train.checkpoint_async="$([ $mode = async ] && echo true || echo false)" \
      >"$tmp/$mode-$round.log" 2>&1
    h=$(held "$tmp/$mode-$round/train.log") s=$(step_mean "$tmp/$mode-$round/metrics.jsonl")
    if [ $mode = sync ]; then
      sync_held+=("$h") sync_step+=("$s")
    else
      async_first+=("$(first "$tmp/$mode-$round/train.log")")
      async_held+=("$(held "$tmp/$mode-$round/train.log" 2)") async_step+=("$s")
    fi
    rm -rf "$tmp/$mode-$round/checkpoints"
  done
done
n=$(median "${none[@]}") sh=$(median "${sync_held[@]}") ah=$(median "${async_held[@]}") af=$(median "${async_first[@]}")
ss=$(median "${sync_step[@]}") as=$(median "${async_step[@]}")
size=$(du -sm "$tmp" | cut -f1)
printf '| case | training held per save (s) | held / synchronous save | target | mean step (s) | step / no checkpoints | target |\n|---|---|---|---|---|---|---|\n'
awk -v n="$n" 'BEGIN { printf "| no checkpoints | | | | %.3f | 1.00x | |\n", n }'
awk -v h="$sh" -v s="$ss" -v n="$n" 'BEGIN { printf "| synchronous, every 30 steps | %.3f | 1.00x | | %.3f | %.2fx | |\n", h, s, s / n }'
awk -v h="$af" -v sh="$sh" 'BEGIN { printf "| train.checkpoint_async, first save (allocates the staging) | %.3f | %.2fx | | | | |\n", h, h / sh }'
awk -v h="$ah" -v sh="$sh" -v s="$as" -v n="$n" 'BEGIN { printf "| train.checkpoint_async, later saves | %.3f | %.2fx | <= 0.10x | %.3f | %.2fx | <= 1.05x |\n", h, h / sh, s, s / n }'
echo
echo "checkpoint: GPT-2 124M, parameters + AdamW state; threads: $threads; rounds: $rounds; machine: $(nproc) cores, $(uname -m); torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')"

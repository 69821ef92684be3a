#!/usr/bin/env bash
# Strategy combinations on a 12-block GPT: peak memory (frugal's tracking allocator, the same
# counter loaded into the Python process) and median step time, frugal vs Python PyTorch
# (torch.autocast, GradScaler, torch.utils.checkpoint non-reentrant), weights exported from
# frugal, same batch shape and thread count. Prints a markdown table.
#   bash bench/strategies/run.sh [THREADS]
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
py=.venv/bin/python
cfg=bench/strategies/gpt12.yaml
# fp16 on a CPU without half-precision matrix units runs ~30x slower than fp32 (a
# 29 s step here), so it is opt-in: FRUGAL_BENCH_FP16=1.
combos=${FRUGAL_BENCH_COMBOS:-"fp32:none fp32:full fp32:every_k fp32:selective bf16-mixed:none bf16-mixed:full"}
[ "${FRUGAL_BENCH_FP16:-0}" = 1 ] && combos="$combos fp16-mixed:none"

# Weights for Python: frugal's initialisation (seed 1) after one step, exported; frugal's runs
# start from the same seed's initialisation. Memory and time do not depend on the values.
build/bin/frugal train "$cfg" --set run.dir="$tmp" --set run.name=init --set train.max_steps=1 >/dev/null
build/bin/frugal export "$tmp/init" --format safetensors -o "$tmp/w.safetensors" >/dev/null

frugal_figures() {  # median step time, max peak, min baseline from a metrics.jsonl (skip 2 steps)
  $py - "$1" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][2:]
print(statistics.median(x["step_time_s"] for x in r), max(x["mem_allocated_peak_bytes"] for x in r),
      min(x["mem_allocated_bytes"] for x in r))
PY
}

rounds=${FRUGAL_BENCH_ROUNDS:-3}
printf '| precision | checkpointing | frugal step (s) | PyTorch step (s) | time ratio (range over rounds) | frugal peak (MiB) | PyTorch peak (MiB) | peak ratio | frugal activations (MiB) | PyTorch activations (MiB) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for combo in $combos; do
  p=${combo%%:*}; c=${combo##*:}
  # frugal and Python alternate, `rounds` times: this machine's step times drift by several
  # percent over minutes, and alternation shares the drift between the two sides.
  : >"$tmp/$p-$c.rounds"
  for round in $(seq "$rounds"); do
    set -- --set run.dir="$tmp" --set run.name="$p-$c-$round" --set run.threads="$threads" \
      --set strategy.precision="$p" --set strategy.checkpointing.policy="$c"
    build/bin/frugal config show "$cfg" "$@" >"$tmp/$p-$c.yaml"
    build/bin/frugal train "$cfg" "$@" >"$tmp/$p-$c.log" 2>&1 || { cat "$tmp/$p-$c.log"; exit 1; }
    read -r ft fpeak fbase < <(frugal_figures "$tmp/$p-$c-$round/metrics.jsonl")
    read -r pt ppeak pbase < <($py bench/strategies/python_step.py "$tmp/$p-$c.yaml" "$p" "$c" \
        "$tmp/w.safetensors" "$threads" build/lib/libfrugal.so |
      $py -c 'import json,sys; j=json.load(sys.stdin); print(j["median_step_s"], j["peak_bytes"], j["baseline_bytes"])')
    echo "$ft $pt $fpeak $ppeak $fbase $pbase" >>"$tmp/$p-$c.rounds"
  done
  $py - "$p" "$c" "$tmp/$p-$c.rounds" <<'PY'
import statistics, sys
p, c, path = sys.argv[1:]
rows = [list(map(float, l.split())) for l in open(path)]
ft = statistics.median(r[0] for r in rows); pt = statistics.median(r[1] for r in rows)
ratios = [r[0] / r[1] for r in rows]
fp, pp = max(r[2] for r in rows), max(r[3] for r in rows)
fb, pb = min(r[4] for r in rows), min(r[5] for r in rows)
M = 1048576
print(f"| {p} | {c} | {ft:.2f} | {pt:.2f} | {ft / pt:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | "
      f"{fp / M:.1f} | {pp / M:.1f} | {fp / pp:.2f}x | {(fp - fb) / M:.1f} | {(pp - pb) / M:.1f} |")
PY
done
echo
echo "threads: $threads; $(nproc) cores, $(uname -m); torch $($py -c 'import torch; print(torch.__version__)')"
echo "activations = peak minus the bytes live before the step (weights + optimizer state); steps: medians of $rounds alternating rounds."

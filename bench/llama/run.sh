#!/usr/bin/env bash
# A SmolLM2-135M-shaped Llama (the smollm2-135m preset), one sequence of 512 tokens per step on
# the CPU: frugal's trainer (`frugal train`) against transformers' LlamaForCausalLM built from
# the same shapes (bench/llama/python_step.py), AdamW, clipping at 1.0, same thread count, for
# {fp32, bf16-mixed} x {no checkpointing, full checkpointing}. Prints a markdown table.
#
# What is measured, the same way on both sides:
# - step time: forward, loss, backward, the loss read back, clipping, AdamW, zeroing the
#   gradients (frugal: the engine's step_time_s in metrics.jsonl; Python: perf_counter around
#   the same work); the median over the steps after the first (warm-up) of a run, then the
#   median over rounds;
# - peak memory: the most tensor bytes live during a step, by frugal's tracking CPU allocator,
#   which the Python process loads from libfrugal.so and installs before it builds the model
#   (as bench/strategies does); "activations" is that peak minus the bytes live before the
#   step (weights and AdamW moments);
# - peak RSS: the process's VmHWM after its last step (frugal's metrics.jsonl reads the same
#   field), which also counts the libraries, the interpreter and transformers' modules, and
#   memory the allocator keeps after a free: context, not the comparison.
#
#   bash bench/llama/run.sh [THREADS]
#   FRUGAL_BENCH_ROUNDS=3 FRUGAL_BENCH_STEPS=5 bash bench/llama/run.sh 2
#   FRUGAL_BENCH_CASES="bf16-mixed:full" bash bench/llama/run.sh
# Only the CLI (and libfrugal.so) is needed: build that target unless told otherwise.
export FRUGAL_BUILD_TARGET=${FRUGAL_BUILD_TARGET:-frugal_cli}
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
py=.venv/bin/python
cfg=bench/llama/smollm2-135m.yaml
cases=${FRUGAL_BENCH_CASES:-"fp32:none fp32:full bf16-mixed:none bf16-mixed:full"}
rounds=${FRUGAL_BENCH_ROUNDS:-2}
steps=${FRUGAL_BENCH_STEPS:-4}

# Per-step figures of one run as "time peak baseline rss", one line per step after the first.
frugal_steps() {
  $py - "$1" <<'PY'
import json, sys
for r in [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][1:]:
    print(r["step_time_s"], r["mem_allocated_peak_bytes"], r["mem_allocated_bytes"], r["host_rss_peak_bytes"])
PY
}
python_steps() {
  $py -c '
import json, sys
j = json.load(sys.stdin)
for row in list(zip(j["step_s"], j["peak_bytes"], j["baseline_bytes"], j["rss_peak_bytes"]))[1:]:
    print(*row)'
}

printf '| precision | checkpointing | frugal step (s) | transformers step (s) | time ratio (range over rounds) | frugal peak (MiB) | transformers peak (MiB) | peak ratio | frugal activations (MiB) | transformers activations (MiB) | frugal peak RSS (MiB) | transformers peak RSS (MiB) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|\n'
for case in $cases; do
  p=${case%%:*}; c=${case##*:}
  # frugal and Python alternate: this machine's speed drifts by several percent over minutes,
  # and alternation shares the drift between the two sides.
  : >"$tmp/$p-$c.rounds"
  for round in $(seq "$rounds"); do
    set -- --set run.dir="$tmp" --set run.name="$p-$c-$round" --set run.threads="$threads" \
      --set train.max_steps="$steps" --set strategy.precision="$p" \
      --set strategy.checkpointing.policy="$c"
    build/bin/frugal config show "$cfg" "$@" >"$tmp/$p-$c.yaml"
    build/bin/frugal train "$cfg" "$@" >"$tmp/$p-$c.log" 2>&1 || { cat "$tmp/$p-$c.log"; exit 1; }
    frugal_steps "$tmp/$p-$c-$round/metrics.jsonl" >"$tmp/f"
    rm -rf "${tmp:?}/$p-$c-$round"  # its final checkpoint: 1.6 GB
    $py bench/llama/python_step.py "$tmp/$p-$c.yaml" "$p" "$c" "$threads" build/lib/libfrugal.so \
      >"$tmp/p.json"
    python_steps <"$tmp/p.json" >"$tmp/p"
    echo "$(paste -sd' ' "$tmp/f") | $(paste -sd' ' "$tmp/p")" >>"$tmp/$p-$c.rounds"
  done
  $py - "$p" "$c" "$tmp/$p-$c.rounds" <<'PY'
import statistics, sys
p, c, path = sys.argv[1:]
def side(text):  # "t peak base rss t peak base rss ..." -> per-step tuples
    v = list(map(float, text.split()))
    return [v[i:i + 4] for i in range(0, len(v), 4)]
rounds = [tuple(side(half) for half in line.split("|")) for line in open(path)]
# Per round: the median step; over rounds: the median of those, and the ratio's range.
ft_r = [statistics.median(s[0] for s in f) for f, _ in rounds]
pt_r = [statistics.median(s[0] for s in q) for _, q in rounds]
ratios = [a / b for a, b in zip(ft_r, pt_r)]
allf = [s for f, _ in rounds for s in f]; allp = [s for _, q in rounds for s in q]
fp, pp = max(s[1] for s in allf), max(s[1] for s in allp)
fb, pb = min(s[2] for s in allf), min(s[2] for s in allp)
fr, pr = max(s[3] for s in allf), max(s[3] for s in allp)
ft, pt = statistics.median(ft_r), statistics.median(pt_r)
M = 1048576
print(f"| {p} | {c} | {ft:.2f} | {pt:.2f} | {ft / pt:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | "
      f"{fp / M:.2f} | {pp / M:.2f} | {fp / pp:.4f}x | {(fp - fb) / M:.1f} | {(pp - pb) / M:.1f} | "
      f"{fr / M:.0f} | {pr / M:.0f} |")
PY
done
echo
attn=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["attn_implementation"])' "$tmp/p.json")
bt=$($py -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1]))["data"]; print("B %d, T %d" % (d["micro_batch_size"], d["seq_len"]))' "$tmp/$p-$c.yaml")
echo "threads: $threads; $bt; $steps steps per run (the first is warm-up), $rounds alternating rounds;" \
  "$(nproc) cores, $(uname -m); torch $($py -c 'import torch; print(torch.__version__)')," \
  "transformers $($py -c 'import transformers; print(transformers.__version__)') (attention: $attn)"
echo "activations = peak minus the bytes live before the step (weights + AdamW moments)."

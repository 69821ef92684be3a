#!/usr/bin/env bash
# Convergence of the low-bit optimizer states on the built-in default (configs/default.yaml:
# the 0.8M-parameter character-level GPT on Debian's fortunes), shortened to STEPS steps
# (warmup and evaluation scaled with it): adamw, adamw8bit (optim.quant_block 256) and
# adafactor (factored second moment only) and adafactor-beta1 (with transformers' first moment,
# optim.beta1 0.9), each over the same seeds, data and schedule; the final validation loss of
# every run, the mean per optimizer and its ratio to adamw's. Adafactor runs with
# optim.scale_parameter=false, so that it takes AdamW's learning rate as it is (its update is
# normalised and clipped to RMS 1 like Adam's); FRUGAL_BENCH_ADAFACTOR overrides its settings.
#   bash bench/lowbit/run.sh [threads]    FRUGAL_BENCH_STEPS=150 FRUGAL_BENCH_SEEDS="1 2 3"
#   FRUGAL_BENCH_OPTIMIZERS="adamw adafactor-beta1"   (adamw first: the ratios are to it)
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
py=.venv/bin/python
steps=${FRUGAL_BENCH_STEPS:-150}
seeds=${FRUGAL_BENCH_SEEDS:-1 2 3}
optimizers=${FRUGAL_BENCH_OPTIMIZERS:-adamw adamw8bit adafactor adafactor-beta1}
adafactor=${FRUGAL_BENCH_ADAFACTOR:---set optim.scale_parameter=false}
warmup=$(( steps / 12 > 0 ? steps / 12 : 1 ))
started=$(date +%s)
for seed in $seeds; do
  for opt in $optimizers; do
    extra="" type=$opt
    case $opt in
      adafactor) extra=$adafactor ;;
      adafactor-beta1) type=adafactor extra="$adafactor --set optim.beta1=0.9" ;;
    esac
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=$threads build/bin/frugal train configs/default.yaml \
      --set run.dir="$tmp" --set run.name="$opt-$seed" --set run.seed="$seed" \
      --set optim.type="$type" --set train.max_steps="$steps" --set train.eval_every="$steps" \
      --set schedule.warmup_steps="$warmup" --set train.checkpoint_every=0 \
      --set train.progress=none --set generate.tokens=0 $extra >"$tmp/$opt-$seed.log" 2>&1 ||
      { cat "$tmp/$opt-$seed.log"; exit 1; }
  done
done
$py - "$tmp" "$seeds" "$optimizers" <<'PY'
import json, statistics, sys
tmp, seeds, opts = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def final_val(run):
    vals = [json.loads(l) for l in open(f"{tmp}/{run}/metrics.jsonl")]
    vals = [r["val_loss"] for r in vals if "val_loss" in r]
    return vals[-1]
loss = {o: [final_val(f"{o}-{s}") for s in seeds] for o in opts}
base = statistics.mean(loss[opts[0]])
print("| optimizer | " + " | ".join(f"seed {s}" for s in seeds) + f" | mean | vs {opts[0]} |")
print("|---|" + "---|" * len(seeds) + "---|---|")
for o in opts:
    m = statistics.mean(loss[o])
    print(f"| {o} | " + " | ".join(f"{v:.4f}" for v in loss[o]) + f" | {m:.4f} | {m / base:.4f} |")
PY
echo
echo "final val loss after $steps steps (configs/default.yaml otherwise); $threads threads;" \
     "$(( $(date +%s) - started )) s"

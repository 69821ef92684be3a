#!/usr/bin/env bash
# GPT-2 124M bf16 on the GPU, frugal vs Python PyTorch from the same torch, same weights
# (exported from frugal), same batch shape: tokens/s, MFU against the measured bf16 matmul
# rate, peak memory and the memory resident between steps (model state); without and with full
# activation checkpointing, frugal with optimizer offload (against its own device-only row:
# step time and resident memory), and torch.compile as a reference row. Prints a markdown table.
# Called by tools/gpu/check.sh:  bash bench/gpu/run.sh PYTHON OUT_DIR FRUGAL_COMMAND...
# (FRUGAL_COMMAND: the frugal binary, or the bundle's launcher and bin/frugal).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
py=$1 out=$2
shift 2
frugal=("$@")
steps=${FRUGAL_GPU_STEPS:-20}
cfg=bench/gpu/gpt2-124m.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The model's sizes, for the Python side (which has no YAML parser there).
model_json=$("${frugal[@]}" config show "$cfg" | awk -f bench/gpu/model_json.awk)
batch=$("${frugal[@]}" config show "$cfg" | awk '/^data:/ {d=1; next} /^[a-z]/ {d=0} d && $1 == "micro_batch_size:" {print $2}')

"${frugal[@]}" train "$cfg" --set run.dir="$tmp" --set run.name=init --set train.max_steps=1 >"$tmp/init.log" 2>&1 ||
  { cat "$tmp/init.log" >&2; exit 1; }
"${frugal[@]}" export "$tmp/init" --format pt -o "$tmp/w.pt" >/dev/null

# frugal's rows: checkpointing none / full, and optimizer offload.
for row in none full offload; do
  policy=$([ $row = full ] && echo full || echo none)
  "${frugal[@]}" train "$cfg" --set run.dir="$tmp" --set run.name="$row" --set train.max_steps="$steps" \
    --set strategy.checkpointing.policy="$policy" \
    --set strategy.offload.optimizer="$([ $row = offload ] && echo true || echo false)" \
    >"$out/frugal-$row.log" 2>&1 || { tail -20 "$out/frugal-$row.log" >&2; exit 1; }
  cp "$tmp/$row/metrics.jsonl" "$out/frugal-$row.metrics.jsonl"
done
# Python's: eager none / full, and torch.compile (its compilation may not fit the time given).
for policy in none full compile; do
  timeout 120 "$py" bench/gpu/python_gpt2.py "$model_json" "$tmp/w.pt" "$policy" "$steps" "$batch" \
    >"$out/python-$policy.json" 2>"$out/python-$policy.err" || echo '{}' >"$out/python-$policy.json"
done

"$py" - "$out" "$model_json" "$batch" <<'PY'
import json, statistics, sys
out, c, batch = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
T, L, d = c["block_size"], c["n_layer"], c["n_embd"]
ref = json.load(open(f"{out}/python-none.json"))
# Matmul FLOPs per token (forward + backward): 6 per parameter that multiplies (all but the
# position embedding; the tied token embedding is the output projection) + attention.
n = ref["n_params"] - T * d
flops_per_token = 6 * n + 12 * L * d * T
peak_rate = ref["matmul_tflops"] * 1e12
print("| side | run | step (ms) | tokens/s | MFU | peak allocated (GiB) | resident between steps (GiB) |")
print("|---|---|---|---|---|---|---|")
steps = {}
for row in ("none", "full", "offload"):
    recs = [json.loads(l) for l in open(f"{out}/frugal-{row}.metrics.jsonl") if '"loss"' in l][5:]
    step = statistics.median(r["step_time_s"] for r in recs)
    tok = batch * T / step
    peak = max(r["mem_allocated_peak_bytes"] for r in recs)
    resident = statistics.median(r["mem_allocated_bytes"] for r in recs)
    steps[row] = (step, resident)
    label = {"none": "checkpointing none", "full": "checkpointing full", "offload": "optimizer offload"}[row]
    print(f"| frugal | {label} | {step * 1e3:.1f} | {tok:,.0f} | {tok * flops_per_token / peak_rate:.1%} | {peak / 2**30:.2f} | {resident / 2**30:.2f} |")
for policy in ("none", "full", "compile"):
    py = json.load(open(f"{out}/python-{policy}.json"))
    label = {"none": "eager", "full": "eager, checkpointing full", "compile": "torch.compile"}[policy]
    if not py:
        print(f"| PyTorch | {label} | did not finish (see python-{policy}.err) | | | | |")
        continue
    tok = py["tokens_per_s"]
    print(f"| PyTorch | {label} | {py['median_step_s'] * 1e3:.1f} | {tok:,.0f} | {tok * flops_per_token / peak_rate:.1%} | {py['peak_bytes'] / 2**30:.2f} | |")
print()
print(f"bf16 matmul rate measured: {ref['matmul_tflops']:.0f} TFLOP/s (8192^3); batch {batch} x {T} tokens; "
      f"{flops_per_token / 1e9:.2f} GFLOP per token")
ratio = steps["offload"][0] / steps["none"][0]
print(f"optimizer offload: step time {ratio:.2f}x the device-only step (target <= 1.5x: "
      f"{'met' if ratio <= 1.5 else 'NOT met'}); resident memory {steps['offload'][1] / 2**30:.2f} GiB "
      f"against {steps['none'][1] / 2**30:.2f} GiB")

# The same figures as rows of tools/gpu/check.sh's one table: check | result | frugal |
# reference | criterion.
def fig(tok, peak):
    return f"{tok:,.0f} tok/s, MFU {tok * flops_per_token / peak_rate:.1%}, peak {peak / 2**30:.2f} GiB"
py = {p: json.load(open(f"{out}/python-{p}.json")) for p in ("none", "full", "compile")}
with open(f"{out}/bench-rows.md", "w") as rows:
    for row, ref in (("none", "none"), ("full", "full")):
        recs = [json.loads(l) for l in open(f"{out}/frugal-{row}.metrics.jsonl") if '"loss"' in l][5:]
        peak = max(r["mem_allocated_peak_bytes"] for r in recs)
        reference = f"eager: {fig(py[ref]['tokens_per_s'], py[ref]['peak_bytes'])}" if py[ref] else "eager: did not finish"
        if row == "none":
            reference += (f"; torch.compile: {py['compile']['tokens_per_s']:,.0f} tok/s" if py["compile"]
                          else "; torch.compile: did not finish")
        rows.write(f"| GPT-2 124M bf16, T {T}, B {batch}, checkpointing {row} | measured | "
                   f"{fig(batch * T / steps[row][0], peak)} | {reference} | figures |\n")
    rows.write(f"| GPT-2 124M bf16, optimizer offload | {'pass' if ratio <= 1.5 else 'FAIL'} | "
               f"step {ratio:.2f}x the device-only step; resident {steps['offload'][1] / 2**30:.2f} GiB | "
               f"device-only: resident {steps['none'][1] / 2**30:.2f} GiB | step time <= 1.5x |\n")
PY

#!/usr/bin/env bash
# GPT-2 124M bf16 on the GPU, frugal vs Python PyTorch from the same torch, same weights
# (exported from frugal), same batch shape: tokens/s, MFU against the measured bf16 matmul
# rate, peak memory; without and with full activation checkpointing. Prints a markdown table.
# Called by tools/gpu/check.sh:  bash bench/gpu/run.sh FRUGAL_BINARY PYTHON OUT_DIR
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
frugal=$1 py=$2 out=$3
steps=${FRUGAL_GPU_STEPS:-30}
cfg=bench/gpu/gpt2-124m.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The model's sizes, for the Python side (which has no YAML parser there).
model_json=$("$frugal" config show "$cfg" | awk '
  /^model:/ {m=1; next} /^[a-z]/ {m=0}
  m && $1 ~ /^(vocab_size|block_size|n_layer|n_head|n_embd|dropout|bias):$/ {
    k=substr($1, 1, length($1)-1); v[k]=$2 }
  END { printf "{\"vocab_size\": %s, \"block_size\": %s, \"n_layer\": %s, \"n_head\": %s, \"n_embd\": %s, \"dropout\": %s, \"bias\": %s}",
        v["vocab_size"], v["block_size"], v["n_layer"], v["n_head"], v["n_embd"], v["dropout"], v["bias"] }')
batch=$("$frugal" config show "$cfg" | awk '/^data:/ {d=1; next} /^[a-z]/ {d=0} d && $1 == "micro_batch_size:" {print $2}')

"$frugal" train "$cfg" --set run.dir="$tmp" --set run.name=init --set train.max_steps=1 >"$tmp/init.log" 2>&1 ||
  { cat "$tmp/init.log" >&2; exit 1; }
"$frugal" export "$tmp/init" --format pt -o "$tmp/w.pt" >/dev/null

rows=()
for policy in none full; do
  "$frugal" train "$cfg" --set run.dir="$tmp" --set run.name="$policy" --set train.max_steps="$steps" \
    --set strategy.checkpointing.policy="$policy" >"$out/frugal-$policy.log" 2>&1 ||
    { tail -20 "$out/frugal-$policy.log" >&2; exit 1; }
  cp "$tmp/$policy/metrics.jsonl" "$out/frugal-$policy.metrics.jsonl"
  "$py" bench/gpu/python_gpt2.py "$model_json" "$tmp/w.pt" "$policy" "$steps" "$batch" >"$out/python-$policy.json"
  rows+=("$policy")
done

"$py" - "$out" "$model_json" "$batch" "${rows[@]}" <<'PY'
import json, statistics, sys
out, c, batch, policies = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
T, L, d = c["block_size"], c["n_layer"], c["n_embd"]
print("| side | checkpointing | step (ms) | tokens/s | MFU | peak allocated (GiB) |")
print("|---|---|---|---|---|---|")
for policy in policies:
    py = json.load(open(f"{out}/python-{policy}.json"))
    # Matmul FLOPs per token (forward + backward): 6 per parameter that multiplies (all but the
    # position embedding; the tied token embedding is the output projection) + attention.
    n = py["n_params"] - T * d
    flops_per_token = 6 * n + 12 * L * d * T
    peak = py["matmul_tflops"] * 1e12
    recs = [json.loads(l) for l in open(f"{out}/frugal-{policy}.metrics.jsonl") if '"loss"' in l][5:]
    f_step = statistics.median(r["step_time_s"] for r in recs)
    f_tok = batch * T / f_step
    f_peak = max(r["mem_allocated_peak_bytes"] for r in recs)
    for side, step, tok, mem in (("frugal", f_step, f_tok, f_peak),
                                 ("PyTorch", py["median_step_s"], py["tokens_per_s"], py["peak_bytes"])):
        print(f"| {side} | {policy} | {step * 1e3:.1f} | {tok:,.0f} | {tok * flops_per_token / peak:.1%} | {mem / 2**30:.2f} |")
print()
print(f"bf16 matmul rate measured: {py['matmul_tflops']:.0f} TFLOP/s (8192^3); batch {batch} x {T} tokens; "
      f"{flops_per_token / 1e9:.2f} GFLOP per token")
PY

#!/usr/bin/env bash
# Per-rank model-state memory and per-step traffic of each sharding mode at 1, 2 and 4 ranks
# (Gloo on loopback), measured, against the formulas:
#   memory (tracking allocator, bytes live after a step): fp32 AdamW keeps 4 bytes of
#     parameters + 4 of gradients + 8 of moments = 16 bytes per parameter Ψ (ZeRO's 16Ψ);
#     zero1 divides the moments by N (8Ψ + 8Ψ/N), zero2 also the gradients (4Ψ + 12Ψ/N),
#     zero3 everything (16Ψ/N)
#   traffic (what each rank sends per step, ring algorithm, (N-1)/N x 4 bytes per element
#     per pass): ddp all-reduces the gradients (2 passes: 2Ψ), zero1/2 reduce-scatter them
#     and all-gather the parameters (2Ψ), zero3 gathers each block for forward and again for
#     backward and reduce-scatters it (3Ψ; its root unit, kept from forward to backward, 2Ψ)
# Prints a markdown table.   bash bench/distributed/run.sh
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
py=.venv/bin/python
cfg=bench/distributed/gpt.yaml
printf '| mode | ranks | params Ψ | model state per rank (MiB) | formula (MiB) | ratio | sent per step per rank (MiB) | theory (MiB) | ratio | step (s) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for mode in ${FRUGAL_BENCH_MODES:-ddp zero1 zero2 zero3}; do
  for n in 1 2 4; do
    name="$mode-$n"
    build/bin/frugal launch --nproc-per-node "$n" --master-port 0 -- train "$cfg" \
      --set run.dir="$tmp" --set run.name="$name" --set strategy.sharding="$mode" \
      --set data.micro_batch_size=$((8 / n)) >"$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log"; exit 1; }
    build/bin/frugal export "$tmp/$name" --format safetensors -o "$tmp/$name.safetensors" >/dev/null
    $py - "$tmp" "$name" "$mode" "$n" <<'PY'
import glob, json, statistics, sys
from safetensors import safe_open
tmp, name, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with safe_open(f"{tmp}/{name}.safetensors", "pt") as f:
    psi = sum(f.get_tensor(k).numel() for k in f.keys())
    psi_root = sum(f.get_tensor(k).numel() for k in f.keys() if not k.startswith("blocks."))
state, sent, times = [], [], []
for path in sorted(glob.glob(f"{tmp}/{name}/metrics.rank*.jsonl")):
    recs = [json.loads(l) for l in open(path) if '"loss"' in l][2:]
    state.append(max(r["mem_allocated_bytes"] for r in recs))
    sent.append(statistics.median(r["comm_sent_bytes_per_step"] for r in recs))
    times.append(statistics.median(r["step_time_s"] for r in recs))
M = 2**20
whole = {"ddp": 16, "zero1": 8, "zero2": 4, "zero3": 0}[mode]   # bytes/param not sharded
formula = (whole + (16 - whole) / n) * psi
passes = 3 * (psi - psi_root) + 2 * psi_root if mode == "zero3" else 2 * psi
theory = (n - 1) / n * 4 * passes
measured_state, measured_sent = max(state), max(sent)
ratio_sent = f"{measured_sent / theory:.3f}x" if theory else "-"
print(f"| {mode} | {n} | {psi / 1e6:.2f}M | {measured_state / M:.1f} | {formula / M:.1f} | "
      f"{measured_state / formula:.3f}x | {measured_sent / M:.2f} | {theory / M:.2f} | {ratio_sent} | "
      f"{max(times):.3f} |")
PY
  done
done
echo
echo "$(nproc) cores; Gloo on loopback; model state = the most bytes live after a step on any rank (parameters, gradients, optimizer state, the batch); sent = this rank's collectives per step, ring model."

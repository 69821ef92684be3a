#!/usr/bin/env bash
# Past PyTorch's memory floor: GPT-2 124M (T 1024, micro-batch 8) on the CPU, peak memory and
# step time of
#   (a) PyTorch's usual best in Python: bf16 autocast, every block checkpointed
#       (torch.utils.checkpoint, non-reentrant), fused AdamW (bench/strategies/python_step.py);
#   (b) frugal with the same: bf16-mixed, checkpointing full, AdamW;
#   (c) frugal with everything on: (b) + activation offload, chunked loss (256 tokens), the
#       optimizer step in backward, 8-bit AdamW states.
# Peaks are frugal's tracking allocator's, the same counter loaded into the Python process; on
# the CPU, activation offload's host pool is counted apart (its column), as pinned host memory
# is apart from a GPU's. Prints two markdown tables: the figures, and each peak's breakdown.
#   bash bench/frontier/run.sh [THREADS]       (about 12 minutes on 2 cores)
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
py=.venv/bin/python
cfg=bench/frontier/gpt2-124m.yaml
everything=(--set strategy.offload.activations=true --set model.loss_chunk_tokens=256
            --set optim.in_backward=true --set optim.type=adamw8bit)

# frugal_run NAME [ARGS...]: "step_s peak_bytes baseline_bytes host_peak_bytes" over the steps after
# the first two (as python_step.py: the first steps allocate the optimizer state).
frugal_run() {
  local name=$1; shift
  build/bin/frugal train "$cfg" --set run.dir="$tmp" --set run.name="$name" \
    --set run.threads="$threads" "$@" >"$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log" >&2; exit 1; }
  $py - "$tmp/$name/metrics.jsonl" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][2:]
print(statistics.median(x["step_time_s"] for x in r), max(x["mem_allocated_peak_bytes"] for x in r),
      min(x["mem_allocated_bytes"] for x in r),
      max(x.get("offload_activations_host_peak_bytes", 0) for x in r))
PY
}

build/bin/frugal config show "$cfg" >"$tmp/resolved.yaml"
read -r at apeak abase aparams agrads < <($py bench/strategies/python_step.py "$tmp/resolved.yaml" \
    bf16-mixed full - "$threads" build/lib/libfrugal.so |
  $py -c 'import json,sys; j=json.load(sys.stdin); print(j["median_step_s"], j["peak_bytes"], j["baseline_bytes"], j["param_bytes"], j["grad_bytes"])')
read -r bt bpeak bbase bhost < <(frugal_run same)
read -r ct cpeak cbase chost < <(frugal_run everything "${everything[@]}")
[ -n "$at" ] && [ -n "$bt" ] && [ -n "$ct" ] || { echo "frontier: a run failed (above)" >&2; exit 1; }

$py - "$tmp/resolved.yaml" "$at $apeak $abase $aparams $agrads" "$bt $bpeak $bbase $bhost" \
  "$ct $cpeak $cbase $chost" <<'PY'
import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
m, d = cfg["model"], cfg["data"]
B, T, V, C = d["micro_batch_size"], m["block_size"], m["vocab_size"], m["n_embd"]
a, b, c = ([float(x) for x in s.split()] for s in sys.argv[2:5])
params = a[3]                      # fp32 parameters, the same model on every side
largest = V * C * 4                # the tied embedding: the largest gradient in flight
M = 1048576
rows = [
    # name, step, peak, baseline, host, gradients, logits (one fp32 copy of those computed at once)
    ("(a) PyTorch: bf16 autocast + full checkpointing + fused AdamW", a[0], a[1], a[2], 0, a[4], B * T * V * 4),
    ("(b) frugal, the same", b[0], b[1], b[2], b[3], params, B * T * V * 4),
    ("(c) frugal, everything on", c[0], c[1], c[2], c[3], largest, 256 * V * 4),
]
print("| run | step (s) | time vs (a) | peak (MiB) | peak vs (a) | host pool (MiB) |")
print("|---|---|---|---|---|---|")
for name, t, peak, base, host, _, _ in rows:
    print(f"| {name} | {t:.1f} | {t / a[0]:.2f}x | {peak / M:.0f} | {peak / a[1]:.2f}x | {host / M:.0f} |")
print()
print("| run | weights | optimizer states | gradients | logits | activations and the rest |")
print("|---|---|---|---|---|---|")
for name, t, peak, base, host, grads, logits in rows:
    states = base - params
    rest = peak - base - grads - logits
    print(f"| {name} | {params / M:.0f} | {states / M:.0f} | {grads / M:.0f} | {logits / M:.0f} | {rest / M:.0f} |")
PY
echo
echo "threads: $threads; $(nproc) cores, $(uname -m); torch $($py -c 'import torch; print(torch.__version__)')"
echo "MiB; steps 3 and 4 of 4 (median step, max peak). Weights: the fp32 parameters. Optimizer states:"
echo "what lives between steps beyond them (measured). Gradients: all of them for (a) and (b) (they all"
echo "exist at the end of backward; (a)'s measured), the largest one for (c) (each is freed once stepped)."
echo "Logits: one fp32 copy of the B*T*V (or 256*V, chunked) logits. The rest: measured peak minus those."

#!/usr/bin/env bash
# One AdamW step over N fp32 parameters on the CPU, elements per second: frugal's fused CPU
# AdamW (fp32; bf16 parameters with fp32 moments), ATen's fused kernel from C++, the C++
# frontend's torch::optim::AdamW, and Python's torch.optim.AdamW (fused=True, foreach=True)
# from the same wheel, in one run; against the memory-bandwidth bound: 28 bytes per element
# (read parameter, gradient, two moments; write three) at the in-place bandwidth measured in
# the same run. Each figure is the median of ROUNDS rounds (programs alternated, so that the
# machine's drift hits all alike) of 10-step medians.
#   bash bench/cpu_adam/run.sh [threads]      FRUGAL_BENCH_SIZES="1e7 1e8" FRUGAL_BENCH_ROUNDS=5
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
py=.venv/bin/python
rounds=${FRUGAL_BENCH_ROUNDS:-5}
for size in ${FRUGAL_BENCH_SIZES:-1e7 1e8}; do
  n=$($py -c "print(int(float('$size')))")
  reps=$(( n > 50000000 ? 5 : 10 ))
  for r in $(seq "$rounds"); do
    OMP_NUM_THREADS=$threads build/bin/frugal_bench_cpu_adam "$n" "$reps" >>"$tmp/cpp-$n.jsonl"
    OMP_NUM_THREADS=$threads $py bench/cpu_adam/python_adamw.py "$n" "$reps" >>"$tmp/py-$n.jsonl"
  done
done
$py - "$tmp" <<'PY'
import glob, json, statistics, sys
tmp = sys.argv[1]
rows = [("frugal fused CPU AdamW, fp32", "frugal_fp32", 28),
        ("frugal fused CPU AdamW, bf16 params + grads, fp32 moments", "frugal_bf16", 20),
        ("ATen _fused_adamw_ from C++ (torch's fused kernel)", "aten_fused", 28),
        ("torch.optim.AdamW(fused=True), Python", "torch_fused", 28),
        ("torch.optim.AdamW(foreach=True), Python", "torch_foreach", 28),
        ("torch::optim::AdamW, C++ frontend", "torch_cpp", 28)]
def sizes():
    """(N, median of a key over every round of both programs) per size, smallest first."""
    for path in sorted(glob.glob(f"{tmp}/cpp-*.jsonl"), key=lambda p: int(p.split("-")[-1].split(".")[0])):
        n = path.split("-")[-1].split(".")[0]
        recs = [json.loads(l) for l in open(path)] + [json.loads(l) for l in open(f"{tmp}/py-{n}.jsonl")]
        yield int(n), lambda k, recs=recs: statistics.median(r[k] for r in recs if k in r)
print("| N | implementation | Melem/s | vs torch fused | % of bandwidth bound |")
print("|---|---|---|---|---|")
for n, med in sizes():
    bw = med("inplace_bytes_per_s")
    fused = med("torch_fused")
    for label, key, nbytes in rows:
        v = med(key)
        print(f"| {n:.0e} | {label} | {v / 1e6:.0f} | {v / fused:.2f}x | {100 * v * nbytes / bw:.0f}% |")
    print(f"| {n:.0e} | bandwidth bound (28 B/elem at {bw / 1e9:.1f} GB/s in-place; copy {med('copy_bytes_per_s') / 1e9:.1f} GB/s) | {bw / 28 / 1e6:.0f} | | 100% |")
print()
print("The optimizer phase of a training step that clips to norm 1.0 (gradient norm, clipping, AdamW):")
print()
print("| N | implementation | Melem/s | vs PyTorch | bytes per element | % of bandwidth bound |")
print("|---|---|---|---|---|---|")
clip_rows = [("frugal: norm, then FusedAdamW with the clip coefficient folded in", "frugal_clip", 32),
             ("PyTorch: clip_grad_norm_, then AdamW(fused=True)", "torch_fused_clip", 40)]
for n, med in sizes():
    bw = med("inplace_bytes_per_s")
    base = med("torch_fused_clip")
    for label, key, nbytes in clip_rows:
        v = med(key)
        print(f"| {n:.0e} | {label} | {v / 1e6:.0f} | {v / base:.2f}x | {nbytes} | {100 * v * nbytes / bw:.0f}% |")
PY
echo
echo "$threads threads; $(nproc) cores; medians of $rounds rounds; bf16 rows count 20 bytes per element"

#!/usr/bin/env bash
# Framework overhead: median step time of frugal's trainer vs a plain Python PyTorch loop
# (same wheel, model, batch, optimizer, clipping, thread count), printed as a markdown table.
#   bash bench/overhead/run.sh [THREADS]
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"

median_frugal() {  # median step_time_s of a metrics.jsonl, skipping warm-up steps
  .venv/bin/python - "$1" <<'PY'
import json, statistics, sys
t = [json.loads(l)["step_time_s"] for l in open(sys.argv[1]) if '"loss"' in l]
print(statistics.median(t[min(5, len(t) // 4):]))
PY
}

# The machine's speed drifts by several percent between runs, so each case runs `rounds`
# times, frugal and the two Python variants alternating, and the table shows the median of
# the per-round medians (and the spread of the ratio over rounds).
rounds=${FRUGAL_BENCH_ROUNDS:-3}
median() { .venv/bin/python -c 'import statistics,sys; print(statistics.median(map(float, sys.argv[1:])))' "$@"; }

printf '| case | params | frugal (ms) | PyTorch (ms) | frugal / PyTorch (min-max over rounds) | target | PyTorch fused AdamW (ms) | frugal / fused | frugal, train.phase_timing off (ms) | phase timing cost |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for case in tiny-mlp gpt; do
  cfg=bench/overhead/$case.yaml
  target=$([ "$case" = tiny-mlp ] && echo "<= 0.6" || echo "<= 1.0")
  build/bin/frugal config show "$cfg" --set run.dir="$tmp" >"$tmp/$case.yaml"
  py() {
    .venv/bin/python bench/overhead/python_loop.py "$tmp/$case.yaml" "$threads" "$1" |
      .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["median_step_s"])'
  }
  fs=() ps=() pfs=() ratios=() offs=()
  for round in $(seq "$rounds"); do
    build/bin/frugal train "$cfg" --set run.dir="$tmp" --set run.name="$case-$round" \
      --set run.threads="$threads" >"$tmp/$case.log" 2>&1
    f=$(median_frugal "$tmp/$case-$round/metrics.jsonl")
    # The per-phase timing's own cost (docs/observability.md): the same run without it.
    build/bin/frugal train "$cfg" --set run.dir="$tmp" --set run.name="$case-$round-off" \
      --set run.threads="$threads" --set train.phase_timing=false >"$tmp/$case-off.log" 2>&1
    offs+=("$(median_frugal "$tmp/$case-$round-off/metrics.jsonl")")
    p=$(py default)
    fs+=("$f") ps+=("$p") pfs+=("$(py fused)")
    ratios+=("$(awk -v f="$f" -v p="$p" 'BEGIN { print f / p }')")
  done
  params=$(grep -o '[0-9.]*M parameters' "$tmp/$case.log" | head -1)
  f=$(median "${fs[@]}") p=$(median "${ps[@]}") pf=$(median "${pfs[@]}") fo=$(median "${offs[@]}")
  lo=$(printf '%s\n' "${ratios[@]}" | sort -g | head -1) hi=$(printf '%s\n' "${ratios[@]}" | sort -g | tail -1)
  awk -v c="$case" -v n="$params" -v f="$f" -v p="$p" -v t="$target" -v pf="$pf" -v lo="$lo" -v hi="$hi" -v fo="$fo" \
    'BEGIN { printf "| %s | %s | %.3f | %.3f | %.2fx (%.2f-%.2f) | %s | %.3f | %.2fx | %.3f | %+.1f%% |\n", c, n, f*1000, p*1000, f/p, lo, hi, t, pf*1000, f/pf, fo*1000, (f/fo-1)*100 }'
done

# The phase timing's cost within one process (bench/overhead/phase_timing_bench.cpp): on and off
# alternate in blocks of steps, so the drift between separate runs, larger than the cost, cancels.
echo
printf '| case | steps (pairs x block x 2) | step, timing on (ms) | step, timing off (ms) | paired cost (median, IQR) | ranges per step | one range on / off (ns) | cost from the parts |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for spec in tiny-mlp:200:100 gpt:6:4; do
  IFS=: read -r case pairs block <<<"$spec"
  out=$(build/bin/frugal_bench_phase_timing "bench/overhead/$case.yaml" "$pairs" "$block" "$threads")
  .venv/bin/python - "$case" "$out" <<'PY'
import json, sys
case, j = sys.argv[1], json.loads(sys.argv[2])
pct = lambda r: f"{(r - 1) * 100:+.2f}%"
print(f"| {case} | {j['pairs']} x {j['block']} x 2 | {j['median_on_s'] * 1e3:.3f} | {j['median_off_s'] * 1e3:.3f} | "
      f"{pct(j['median_ratio'])} ({pct(j['ratio_q25'])} to {pct(j['ratio_q75'])}) | {j['ranges_per_step']} | "
      f"{j['range_ns_on']:.0f} / {j['range_ns_off']:.0f} | {j['cost_from_parts'] * 100:+.2f}% |")
PY
done
echo
echo "threads: $threads; rounds: $rounds; machine: $(nproc) cores, $(uname -m); torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')"

#!/usr/bin/env bash
# Framework overhead: median step time of frugal's trainer vs a plain Python PyTorch loop
# (same wheel, model, batch, optimizer, clipping, thread count), printed as a markdown table.
#   bash bench/overhead/run.sh [THREADS]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
bash tools/bootstrap.sh >/dev/null
threads=${1:-$(nproc)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median_frugal() {  # median step_time_s of a metrics.jsonl, skipping warm-up steps
  .venv/bin/python - "$1" <<'PY'
import json, statistics, sys
t = [json.loads(l)["step_time_s"] for l in open(sys.argv[1]) if '"loss"' in l]
print(statistics.median(t[min(5, len(t) // 4):]))
PY
}

printf '| case | params | frugal (ms) | PyTorch (ms) | frugal / PyTorch | target | PyTorch fused AdamW (ms) | frugal / fused |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for case in tiny-mlp gpt; do
  cfg=bench/overhead/$case.yaml
  target=$([ "$case" = tiny-mlp ] && echo "<= 0.6" || echo "<= 1.0")
  build/bin/frugal config show "$cfg" --set run.dir="$tmp" >"$tmp/$case.yaml"
  build/bin/frugal train "$cfg" --set run.dir="$tmp" --set run.threads="$threads" >"$tmp/$case.log" 2>&1
  params=$(grep -o '[0-9.]*M parameters' "$tmp/$case.log" | head -1)
  f=$(median_frugal "$tmp/bench-$case/metrics.jsonl")
  py() {
    .venv/bin/python bench/overhead/python_loop.py "$tmp/$case.yaml" "$threads" "$1" |
      .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["median_step_s"])'
  }
  p=$(py default)
  pf=$(py fused)
  awk -v c="$case" -v n="$params" -v f="$f" -v p="$p" -v t="$target" -v pf="$pf" \
    'BEGIN { printf "| %s | %s | %.3f | %.3f | %.2fx | %s | %.3f | %.2fx |\n", c, n, f*1000, p*1000, f/p, t, pf*1000, f/pf }'
done
echo
echo "threads: $threads; machine: $(nproc) cores, $(uname -m); torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')"

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

printf '| case | params | frugal step (ms) | PyTorch step (ms) | frugal / PyTorch | target |\n'
printf '|---|---|---|---|---|---|\n'
for case in tiny-mlp gpt; do
  cfg=bench/overhead/$case.yaml
  target=$([ "$case" = tiny-mlp ] && echo "<= 0.6" || echo "<= 1.0")
  build/bin/frugal config show "$cfg" --set run.dir="$tmp" >"$tmp/$case.yaml"
  build/bin/frugal train "$cfg" --set run.dir="$tmp" --set run.threads="$threads" >"$tmp/$case.log" 2>&1
  params=$(grep -o '[0-9.]*M parameters' "$tmp/$case.log" | head -1)
  f=$(median_frugal "$tmp/bench-$case/metrics.jsonl")
  p=$(.venv/bin/python bench/overhead/python_loop.py "$tmp/$case.yaml" "$threads" |
      .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["median_step_s"])')
  awk -v c="$case" -v n="$params" -v f="$f" -v p="$p" -v t="$target" \
    'BEGIN { printf "| %s | %s | %.3f | %.3f | %.2fx | %s |\n", c, n, f*1000, p*1000, f/p, t }'
done
echo
echo "threads: $threads; machine: $(nproc) cores, $(uname -m); torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')"

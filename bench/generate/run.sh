#!/usr/bin/env bash
# `frugal generate` against transformers' generate on the CPU: the same random Llama folder
# (bench/generate/python_generate.py: SmolLM2-135M's shapes, and a tiny one where per-token
# overhead decides), greedy, KV cache, batch 1, a 16-token prompt and 128 new tokens, fp32 and
# bf16, the same thread count. Prints a markdown table of tokens/s (new tokens over the whole
# call, the prompt's pass included, on both sides), whether the ids agree, and the weights frugal
# reads a second (tokens/s x weight bytes) against the machine's memory read bandwidth measured
# in the same run (python_generate.py bandwidth), and the tokens/s of the matrix products alone
# (python_generate.py ceiling): the ceilings of batch-1 decoding.
#
# frugal: the figures `frugal generate` prints on stderr (one process per round, the model load
# not timed); transformers: perf_counter around model.generate (after one warm-up call). The
# median over rounds.
#
#   bash bench/generate/run.sh [THREADS]
#   FRUGAL_BENCH_ROUNDS=5 FRUGAL_BENCH_SHAPES=tiny bash bench/generate/run.sh 2
export FRUGAL_BUILD_TARGET=${FRUGAL_BUILD_TARGET:-frugal_cli}
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
py=.venv/bin/python
rounds=${FRUGAL_BENCH_ROUNDS:-3}
shapes=${FRUGAL_BENCH_SHAPES:-"tiny smollm2-135m"}
new=128
prompt=$(seq -s, 11 26)
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# The physical limit: a greedy token reads every weight once.
bw=$($py bench/generate/python_generate.py bandwidth | $py -c "import json,sys; print(json.load(sys.stdin)['gb_per_s'])")
printf 'memory read bandwidth (torch.sum over 1 GiB, %s threads): %.1f GB/s\n\n' "$threads" "$bw"
echo "| model | dtype | frugal tokens/s | transformers tokens/s | frugal / transformers | frugal weights read | products alone | same ids |"
echo "|---|---|---|---|---|---|---|---|"
for shape in $shapes; do
  $py bench/generate/python_generate.py make "$tmp/$shape" "$shape" >/dev/null 2>&1
  params=$($py bench/generate/python_generate.py weights "$tmp/$shape" 2>/dev/null | tail -1 |
    $py -c "import json,sys; print(json.load(sys.stdin)['parameters'])")
  for dtype in fp32 bf16; do
    if [ "$dtype" = fp32 ]; then bytes=$((params * 4)); else bytes=$((params * 2)); fi
    times=()
    for _ in $(seq "$rounds"); do
      build/bin/frugal generate "$tmp/$shape" --prompt-ids "$prompt" --max-new-tokens $new \
        --dtype $dtype --ids >"$tmp/frugal.json" 2>"$tmp/frugal.err"
      # "generate: 128 tokens in 0.513 s (...)"
      times+=("$(sed -n 's/^generate: [0-9]* tokens in \([0-9.]*\) s.*/\1/p' "$tmp/frugal.err")")
    done
    f=$(printf '%s\n' "${times[@]}" | median)
    $py bench/generate/python_generate.py time "$tmp/$shape" $dtype $new "$prompt" "$rounds" \
      >"$tmp/python.json" 2>/dev/null
    t=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['seconds'])" "$tmp/python.json")
    same=$($py -c "
import json, sys
a = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])['tokens']
b = json.load(open(sys.argv[2]))['tokens']
print('yes' if a == b else f'{sum(x == y for x, y in zip(a, b))} of {len(b)}')" "$tmp/frugal.json" "$tmp/python.json")
    # The matrix products alone, in torch: the tokens/s no decoder here gets past.
    c=$($py bench/generate/python_generate.py ceiling "$tmp/$shape" $dtype 2>/dev/null | tail -1 |
      $py -c "import json,sys; print(json.load(sys.stdin)['tokens_per_s'])")
    # Weights read: tokens/s x weight bytes, in GB/s and as a share of the machine's bandwidth.
    awk -v s="$shape" -v d="$dtype" -v f="$f" -v t="$t" -v n=$new -v same="$same" -v b="$bytes" \
      -v bw="$bw" -v c="$c" 'BEGIN {r = n / f * b / 1e9; printf "| %s | %s | %.1f | %.1f | %.2fx | %.1f GB/s (%.0f%%) | %.1f tokens/s (frugal %.0f%%) | %s |\n", s, d, n / f, n / t, t / f, r, 100 * r / bw, c, 100 * n / f / c, same}'
  done
done

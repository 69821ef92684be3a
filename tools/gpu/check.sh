#!/usr/bin/env bash
# The GPU machine's check, run from the bundle tools/gpu/bundle.sh builds here, so that nothing
# compiles there (a GPU machine is lent for minutes; this takes about 3 of them on one H200):
#
#   here:            bash tools/gpu/bundle.sh                       (gpu-bundle/, ~11 MiB)
#   device tool:     bash gpu-bundle/check.sh    carry: ["gpu-bundle"]
#
# Every row of the summary compares a measured figure of frugal with a reference computed in
# the same run (frugal on another path, or Python PyTorch from the same wheel on the same
# device: tools/gpu/reference/compare.py, bench/gpu/). Results under $OUT (default gpu-out/):
# summary.md (the table), check.log, and logs.tar.gz (every run's log, metrics, test reports).
#
#   --from-source    build frugal on the GPU machine instead (minutes; needs third_party_gpu/
#                    from tools/gpu/fetch_deps.sh carried too); also taken when the bundle's
#                    binaries do not load there (an older glibc than the bundle's MANIFEST needs)
#   --quick          leave out the GPT-2 124M benchmark
# Knobs: FRUGAL_GPU_PYTHON (default python3), FRUGAL_GPU_STEPS (benchmark steps, default 20).
# Without CUDA (how this script is checked on a CPU machine) each row runs on the CPU where it
# means something there and says "skipped (no CUDA)" where it does not.
set -uo pipefail
self=$(readlink -f "${BASH_SOURCE[0]}")
root=$(cd "$(dirname "$self")/../.." && pwd)
cd "$root"
from_source=0 quick=0
for a in "$@"; do
  case $a in
    --from-source) from_source=1 ;;
    --quick) quick=1 ;;
    *) echo "check.sh: unknown argument '$a' (expected --from-source or --quick)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec > >(tee "$OUT/check.log") 2>&1
py=${FRUGAL_GPU_PYTHON:-python3}
export FRUGAL_GPU_PYTHON=$py
t0=$(date +%s)
say() { printf '[gpu-check %4ss] %s\n' "$(($(date +%s) - t0))" "$*"; }
fail() { say "FAILED: $*"; echo "FAILED: $*" >"$OUT/summary.md"; exit 1; }
# On any exit: every file but check.log and summary.md into one archive.
pack() {
  (cd "$OUT" && files=$(ls | grep -v -x -e check.log -e summary.md -e logs.tar.gz) &&
    [ -n "$files" ] && tar -czf logs.tar.gz $files && rm -rf $files) || true
}
trap pack EXIT
work=$(mktemp -d "${TMPDIR:-/tmp}/frugal-gpu-check.XXXXXX")
runs="$work/runs"
mkdir -p "$runs"

# --- 1. The machine ---------------------------------------------------------------------------
say "machine"
grep -h PRETTY_NAME /etc/os-release 2>/dev/null || uname -a
machine_glibc=$(ldd --version 2>&1 | head -1 | grep -o '[0-9]*\.[0-9]*$')
echo "glibc $machine_glibc; cores: $(nproc)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
# One import of torch for every question (each costs seconds): its version, CUDA, and where it
# lies (the bundle's run takes it from FRUGAL_GPU_TORCH_SITE instead of importing torch again).
torch_info=$("$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__))); print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())') ||
  fail "$py has no torch"
export FRUGAL_GPU_TORCH_SITE=${torch_info%%$'\n'*}
torch_info=${torch_info#*$'\n'}
echo "$torch_info"
if [ "${torch_info##* }" = True ]; then
  dev=cuda
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
else
  dev=cpu
  gpu="no CUDA device: CPU dry run"
fi

# --- 2. frugal: the bundle's binaries, or a source build --------------------------------------
# x CMD...: runs a frugal binary (bin/NAME) with the libraries it needs.
if [ $from_source = 0 ] && [ -x "$root/run" ] && [ -x "$root/bin/frugal" ]; then
  needed=$(sed -n 's/^glibc needed: //p' "$root/MANIFEST")
  cat "$root/MANIFEST"
  if [ -n "$needed" ] && [ "$(printf '%s\n%s\n' "$needed" "$machine_glibc" | sort -V | head -1)" != "$needed" ]; then
    say "this glibc ($machine_glibc) is older than the bundle needs ($needed): building from source"
    from_source=1
  elif ! "$root/run" bin/frugal --version >"$OUT/bundle-load.log" 2>&1; then
    cat "$OUT/bundle-load.log"
    say "the bundle's frugal does not start here: building from source"
    from_source=1
  else
    say "frugal from the bundle: $(cat "$OUT/bundle-load.log")"
    x() { "$root/run" "$@"; }
    frugal_cmd=("$root/run" bin/frugal)
  fi
else
  from_source=1
fi
if [ $from_source = 1 ]; then
  [ -f "$root/tools/gpu/build_from_source.sh" ] || fail "no bundle here and no source tree to build"
  build="$root/build-gpu/build"
  bash "$root/tools/gpu/build_from_source.sh" "$py" "$OUT" || fail "source build (see build.log)"
  x() { local b=$1; shift; "$build/$b" "$@"; }
  frugal_cmd=("$build/bin/frugal")
  export FRUGAL_TEST_BINARY_DIR="$build"
fi

# --- 3. The rows -----------------------------------------------------------------------------
rows="$work/rows.md"
n_fail=0
row() {  # CHECK STATUS FRUGAL REFERENCE CRITERION
  printf '| %s | %s | %s | %s | %s |\n' "$@" >>"$rows"
  say "$1: $2 ($3 vs $4; $5)"
  case $2 in FAIL*) n_fail=$((n_fail + 1)) ;; esac
}
verdict() { "$py" -c "import sys; print('pass' if $1 else 'FAIL')"; }
field() { "$py" -c "import json, sys; print(json.loads(sys.argv[1])$2)" "$1"; }  # JSON EXPR
# train NAME [ARGS...]: the tiny GPT on $dev, one record a step, in $runs/NAME.
base=(configs/tiny-gpt.yaml --set run.dir="$runs" --set run.device="$dev" --set run.seed=7
      --set model.dropout=0.0 --set data.num_workers=0 --set train.max_steps=20
      --set train.log_every=1 --set train.eval_batches=0 --set train.progress=none
      --set generate.tokens=0)
train() {
  local name=$1; shift
  x bin/frugal train "${base[@]}" --set run.name="$name" "$@" >"$OUT/train-$name.log" 2>&1 ||
    { say "frugal train $name failed:"; tail -5 "$OUT/train-$name.log"; return 1; }
  cp "$runs/$name/metrics.jsonl" "$OUT/metrics-$name.jsonl"
}
# (once per run: frugal export never overwrites, and a finished run's weights do not change)
export_pt() {
  [ -f "$runs/$1.pt" ] || x bin/frugal export "$runs/$1" --format pt -o "$runs/$1.pt" >>"$OUT/train-$1.log" 2>&1
}
compare() { "$py" tools/gpu/reference/compare.py "$@" 2>>"$OUT/compare.err"; }
# same_weights NAME REF TOLERANCE CHECK: exported weights of two runs within TOLERANCE. The
# comparisons wait for the end (weight_rows), where one Python process makes them all: each
# torch import costs seconds. The row's place in the table is held by a mark.
pairs="$work/weight-pairs.tsv"
n_pairs=0
same_weights() {
  local name=$1 ref=$2 tol=$3 check=$4
  if ! export_pt "$name" || ! export_pt "$ref"; then row "$check" "FAIL (export)" - - "max abs diff <= $tol"; return; fi
  printf '%s\t%s\t%s\t%s\n' "$runs/$name.pt" "$runs/$ref.pt" "$tol" "$check" >>"$pairs"
  n_pairs=$((n_pairs + 1))
  echo "@@weights $n_pairs@@" >>"$rows"
  say "$check: compared at the end"
}
weight_rows() {
  [ $n_pairs = 0 ] && return
  say "weight comparisons ($n_pairs, one Python process)"
  local done="$work/weight-rows.md" i=0 line
  compare weight-rows "$pairs" >"$done" || : >"$done"
  while IFS= read -r line; do
    if [[ $line == "@@weights "*"@@" ]]; then
      i=$((i + 1))
      line=$(sed -n "${i}p" "$done")
      [ -n "$line" ] || line="| weight comparison $i | FAIL (compare.py; see compare.err) | - | - | - |"
      say "$line"
      case $line in "| "*" | FAIL"*) n_fail=$((n_fail + 1)) ;; esac
    fi
    printf '%s\n' "$line"
  done <"$rows" >"$rows.new"
  mv "$rows.new" "$rows"
}

say "CUDA tests from the test binary"
x bin/frugal_tests "[cuda]" -r junit -o "$OUT/tests-cuda.xml" >"$OUT/tests-cuda.log" 2>&1
rc=$?
# (the JUnit report holds each case's output, with its "SKIPPED: why" line)
read -r cases failed skipped < <("$py" - "$OUT/tests-cuda.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
except Exception:
    print(0, 0, 0); sys.exit()
n = f = s = 0
for c in cases:
    n += 1
    f += c.find("failure") is not None or c.find("error") is not None
    s += "SKIPPED: " in "".join(o.text or "" for o in c.iter("system-out"))
print(n, f, s)
PY
)
counts="$cases cases, $failed failed"
if [ $rc = 77 ]; then
  row "Catch2 [cuda] cases" "skipped (no CUDA)" "$skipped skipped" - "every case passes"
else
  row "Catch2 [cuda] cases" "$([ $rc = 0 ] && echo pass || echo FAIL)" "$counts, $skipped skipped (no CUDA)" \
    "their own references (CPU runs, plain steps)" "every case passes"
fi

say "fp32: $dev against the CPU"
if train fp32 && train fp32-cpu --set run.device=cpu; then
  j=$(compare losses "$OUT/metrics-fp32.jsonl" "$OUT/metrics-fp32-cpu.jsonl")
  d=$(field "$j" '["max_rel_diff"]')
  row "fp32 on $dev" "$(verdict "$d <= 1e-4")" "final loss $(field "$j" '["final_a"]')" \
    "CPU run: $(field "$j" '["final_b"]')" "losses of 20 steps within 1e-4 relative ($d)"
else row "fp32 on $dev" "FAIL (run)" - - -; fi

say "determinism control"
# The bit-exact rows below assume that the same run twice gives the same weights; on a GPU some
# kernels (attention's backward, split-K matmuls) may add in varying order: this row says so.
if train fp32-again; then
  same_weights fp32-again fp32 0 "determinism control: the fp32 run twice"
else row "determinism control: the fp32 run twice" "FAIL (run)" - - -; fi

say "bf16-mixed"
if train bf16 --set strategy.precision=bf16-mixed; then
  j=$(compare losses "$OUT/metrics-bf16.jsonl" "$OUT/metrics-fp32.jsonl")
  d=$(field "$j" '["max_rel_diff"]')
  row "bf16-mixed" "$(verdict "$d <= 0.05")" "final loss $(field "$j" '["final_a"]')" \
    "fp32 run: $(field "$j" '["final_b"]')" "losses within 5% relative ($d)"
else row "bf16-mixed" "FAIL (run)" - - -; fi

say "fp16-mixed + GradScaler with forced overflow"
# An initial scale of 2^24 overflows fp16 for the first steps: each must be skipped and the
# scale halved, as torch.amp.GradScaler does; growth every 4 clean steps after that.
if [ $dev = cpu ]; then
  row "fp16-mixed + GradScaler" "skipped (no CUDA)" - - "fp16 autocast is CUDA's"
elif train fp16 --set strategy.precision=fp16-mixed --set strategy.grad_scaler.init_scale=16777216 \
    --set strategy.grad_scaler.growth_interval=4; then
  j=$(compare scaler "$OUT/metrics-fp16.jsonl" 16777216 4)
  row "fp16-mixed + GradScaler" "$(verdict "$(field "$j" '["skipped_frugal"]') > 0 and not $(field "$j" '["mismatches"]')")" \
    "$(field "$j" '["skipped_frugal"]') steps skipped" \
    "torch.amp.GradScaler: $(field "$j" '["skipped_python"]') skipped, final scale $(field "$j" '["final_scale_python"]')" \
    "same skipped steps and scales every step"
else row "fp16-mixed + GradScaler" "FAIL (run)" - - -; fi

say "full checkpointing with dropout"
if train drop-none --set model.dropout=0.1 && train drop-full --set model.dropout=0.1 --set strategy.checkpointing=full; then
  same_weights drop-full drop-none 0 "full checkpointing, dropout 0.1"
else row "full checkpointing, dropout 0.1" "FAIL (run)" - - -; fi

say "accumulation 4"
if train acc1 --set data.micro_batch_size=16 && train acc4 --set data.micro_batch_size=4 --set strategy.accumulation=4; then
  same_weights acc4 acc1 1e-5 "accumulation 4 (micro-batch 4)"
else row "accumulation 4 (micro-batch 4)" "FAIL (run)" - - -; fi

say "zero3 at world 1"
backend=$([ $dev = cuda ] && echo NCCL || echo Gloo)
launch() {
  local name=$1; shift
  x bin/frugal launch --nproc-per-node 1 --master-port 0 -- train "${base[@]}" --set run.name="$name" "$@" \
    >"$OUT/train-$name.log" 2>&1 || { tail -5 "$OUT/train-$name.log"; return 1; }
}
if launch zero3 --set strategy.sharding=zero3; then
  same_weights zero3 fp32 1e-6 "zero3, world 1 ($backend)"
else row "zero3, world 1 ($backend)" "FAIL (run)" - - -; fi

say "offload"
if train offload-opt --set strategy.offload.optimizer=true; then
  same_weights offload-opt fp32 1e-6 "optimizer offload$([ $dev = cuda ] && echo ' (pinned, side stream)')"
else row "optimizer offload" "FAIL (run)" - - -; fi
if launch offload-params --set strategy.sharding=zero3 --set strategy.offload.optimizer=true --set strategy.offload.params=true; then
  same_weights offload-params fp32 1e-6 "zero3 + params + optimizer offload"
else row "zero3 + params + optimizer offload" "FAIL (run)" - - -; fi

say "resume"
if train resumed --set train.max_steps=10 && train resumed --set run.resume=auto; then
  same_weights resumed fp32 0 "resume at step 10 of 20"
else row "resume at step 10 of 20" "FAIL (run)" - - -; fi

say "memory statistics against Python"
# GPT-2 124M's shape, smaller context, fp32 and AdamW: frugal's peak (metrics) against
# torch.cuda.max_memory_allocated of the same model and batch in Python.
mem_set=(--set model.size=gpt2-124m --set model.block_size=256 --set data.micro_batch_size=8
         --set train.max_steps=3 --set data.synthetic_samples=64 --set model.kernels=aten)
if [ $dev = cpu ]; then
  row "peak allocated vs PyTorch" "skipped (no CUDA)" - - "CPU peaks: bench/strategies"
elif train mem "${mem_set[@]}" --set memory.record_history=true; then
  f_peak=$("$py" -c "import json; print(max(json.loads(l).get('mem_allocated_peak_bytes', 0) for l in open('$OUT/metrics-mem.jsonl')))")
  model_json=$(x bin/frugal config show "${base[@]}" "${mem_set[@]}" |
    awk -f bench/gpu/model_json.awk)
  j=$(compare memory "$model_json" 8 3)
  p_peak=$(field "$j" '["peak_bytes"]')
  row "peak allocated vs PyTorch (GPT-2 124M, T 256, B 8, fp32)" "$(verdict "abs($f_peak / $p_peak - 1) <= 0.05")" \
    "$((f_peak / 1048576)) MiB" "torch.cuda.max_memory_allocated: $((p_peak / 1048576)) MiB" "within 5%"
  snap="$runs/mem/memory_snapshot.pickle"
  j=$(compare snapshot "$snap")
  row "allocator snapshot in torch.cuda._memory_viz" "$(verdict "$(field "$j" '.get("trace_events", 0)') > 0")" \
    "$(field "$j" '.get("trace_events", 0)') trace events, $(field "$j" '.get("segments", 0)') segments" \
    "trace_plot: $(field "$j" '.get("html_bytes", 0)') bytes of HTML" "loads and plots"
else row "peak allocated vs PyTorch" "FAIL (run)" - - -; fi

say "out of memory"
# An absurd micro-batch on CUDA; on the CPU the same through a budget.
oom_set=(--set model.size=gpt2-124m --set model.block_size=1024 --set data.micro_batch_size=512 --set data.synthetic_samples=1024)
[ $dev = cpu ] && oom_set=(--set data.micro_batch_size=64 --set data.synthetic_samples=256 --set memory.budget=4MiB)
x bin/frugal train "${base[@]}" --set run.name=oom "${oom_set[@]}" >"$OUT/train-oom.log" 2>&1
rc=$?
ok=$([ $rc = 2 ] && grep -q "out of memory in step" "$OUT/train-oom.log" && grep -q "would save" "$OUT/train-oom.log" && echo 1 || echo 0)
row "out of memory (absurd micro-batch)" "$([ "$ok" = 1 ] && echo pass || echo FAIL)" "exit $rc, $(grep -c "would save" "$OUT/train-oom.log") advice lines" \
  "a clean exit 2" "report and advice, no crash"

say "find-batch"
fb_set=(--set model.size=gpt2-124m --set model.block_size=512 --set data.synthetic_samples=4096)
[ $dev = cpu ] && fb_set=(--set data.synthetic_samples=1024 --set memory.budget=24MiB)
if x bin/frugal find-batch "${base[@]}" --set run.name=fb "${fb_set[@]}" --max-batch 512 -o "$work/fitted.yaml" >"$OUT/find-batch.log" 2>&1; then
  b=$(awk '/^data:/ {d=1; next} /^[a-z]/ {d=0} d && $1 == "micro_batch_size:" {print $2}' "$work/fitted.yaml")
  x bin/frugal train "$work/fitted.yaml" --set run.name=fb-fit --set train.max_steps=2 >"$OUT/train-fb-fit.log" 2>&1
  fit=$?
  x bin/frugal train "$work/fitted.yaml" --set run.name=fb-twice --set train.max_steps=2 --set data.micro_batch_size=$((2 * b)) >"$OUT/train-fb-twice.log" 2>&1
  twice=$?
  row "find-batch" "$(verdict "$fit == 0 and $twice == 2")" "micro-batch $b: exit $fit" "micro-batch $((2 * b)): exit $twice" \
    "the size found trains, twice it runs out of memory"
else tail -5 "$OUT/find-batch.log"; row "find-batch" "FAIL (run)" - - -; fi

# --- 4. GPT-2 124M bf16: frugal against Python eager and torch.compile (rows of the same table;
#        its full table is bench.md in the archive) ---------------------------------------------
if [ $dev = cuda ] && [ $quick = 0 ]; then
  say "GPT-2 124M bf16 benchmark"
  if timeout 240 bash bench/gpu/run.sh "$py" "$OUT" "${frugal_cmd[@]}" >"$OUT/bench.md" 2>"$OUT/bench.err"; then
    cat "$OUT/bench.md"
    cat "$OUT/bench-rows.md" >>"$rows"
    grep -q '| FAIL |' "$OUT/bench-rows.md" && n_fail=$((n_fail + 1))
  else
    tail -20 "$OUT/bench.err"
    row "GPT-2 124M bf16 benchmark" "FAIL (run)" - - "see bench.err in logs.tar.gz"
  fi
fi

# --- 5. Summary, last -------------------------------------------------------------------------
weight_rows
{
  echo "## tools/gpu/check.sh, $(date -u +%Y-%m-%d), $gpu ($([ $from_source = 1 ] && echo "source build" || echo "bundle"))"
  echo
  echo "| check | result | frugal | reference | criterion |"
  echo "|---|---|---|---|---|"
  cat "$rows"
  echo
  echo "$n_fail failed; total $(($(date +%s) - t0)) s"
} | tee "$OUT/summary.md"
rm -rf "$work"
[ $n_fail = 0 ]

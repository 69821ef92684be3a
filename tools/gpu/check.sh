#!/usr/bin/env bash
# The GPU machine's check, run from the bundle tools/gpu/bundle.sh builds here, so that nothing
# compiles there. A GPU machine is lent for 15 minutes in all, start included: each mode is
# sized to one device call of at most 5 minutes, so that both fit one lend with time to spare.
#
#   here:          bash tools/gpu/bundle.sh                       (gpu-bundle/, ~12 MiB)
#   device tool:   bash gpu-bundle/check.sh           carry ["gpu-bundle"], timeout_s 300
#                  bash gpu-bundle/check.sh --bench   carry ["gpu-bundle"], timeout_s 300
#
#   (default)      the checks: every CUDA path against a reference computed in the same run
#                  (frugal on another path, or Python PyTorch from the same wheel). Measured as a
#                  CPU dry run (the test suite's, GPU-only rows skipped): 40 s for its 30
#                  processes on 2 busy cores. Allowance on the GPU: ~4 s of CUDA start-up for each
#                  of ~25 CUDA processes, ~60 s for the crash trial and the GPT-2-sized memory rows:
#                  an estimated 3-4 minutes, held to the 230 s deadline (the last rows say
#                  "SKIPPED (time)" if it is reached)
#   --bench        the GPT-2 124M bf16 benchmark alone: frugal against Python eager (first, the
#                  reference) and torch.compile (last, with the time left); an estimated 2-3
#                  minutes, under the same deadline
#   --deadline S   the overall deadline (default 230): rows not started by then say
#                  "SKIPPED (time)", a run the deadline cuts short says so too
#   --from-source  build frugal there instead of using the bundle's binaries (minutes; carry
#                  third_party_gpu/ from tools/gpu/fetch_deps.sh too); also taken when the
#                  bundle's frugal does not start there, and the summary says why
#   --list         print the rows' titles, one a line, and exit
#
# Results under $OUT (default gpu-out/), three files whatever happens: summary.md (the table,
# written row by row as rows finish; every result PASS, FAIL, SKIPPED, INCONCLUSIVE or MEASURED,
# with why), check.log (this script's output) and logs.tar.gz (every run's log and metrics,
# repacked after every row). Knobs: FRUGAL_GPU_PYTHON (default python3), FRUGAL_GPU_STEPS (the
# benchmark's steps, default 20), FRUGAL_GPU_RUN_TIMEOUT (one training run's limit, default 90 s),
# FRUGAL_GPU_INJECT (faults for the dry runs: tools/gpu/lib.sh). Without CUDA (how this script is
# tested on a CPU machine) each row runs on the CPU where it means something there and says
# "SKIPPED (no CUDA ...)" where it does not.
set -uo pipefail
self=$(readlink -f "${BASH_SOURCE[0]}")
root=$(cd "$(dirname "$self")/../.." && pwd)
cd "$root"
from_source=0 mode=check deadline_s=230 list=0
while [ $# -gt 0 ]; do
  case $1 in
    --from-source) from_source=1 ;;
    --bench) mode=bench ;;
    --quick) ;;  # the default since the benchmark became its own mode
    --deadline) deadline_s=${2:-}; shift ;;
    --list) list=1 ;;
    *) echo "check.sh: unknown argument '$1' (expected --bench, --deadline S, --from-source or --list)" >&2; exit 2 ;;
  esac
  shift
done
[[ $deadline_s =~ ^[0-9]+$ ]] || { echo "check.sh: --deadline takes whole seconds, got '$deadline_s'" >&2; exit 2; }
t0=$(date +%s)
py=${FRUGAL_GPU_PYTHON:-python3}
export FRUGAL_GPU_PYTHON=$py
run_limit=${FRUGAL_GPU_RUN_TIMEOUT:-90}

OUT=${OUT:-$root/gpu-out}
if [ $list = 0 ]; then
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  rm -f "$OUT/summary.md" "$OUT/logs.tar.gz" "$OUT/check.log"
  exec > >(tee "$OUT/check.log") 2>&1
  tee_pid=$!
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/frugal-gpu-check.XXXXXX")
source "$root/tools/gpu/lib.sh"
source "$root/bench/gpu/rows.sh"

# --- The rows, in the order they run (the most telling first: the deadline cuts the last) ------
if [ $mode = check ]; then
  check_row cuda-load "CUDA libraries loaded at start (libfrugal_cuda.so, docs/gpu.md)" "frugal doctor: loaded, CUDA runtime and GPU 0 seen"
  check_row fp32 "fp32 against the CPU" "losses of 20 steps within 1e-4 relative"
  check_row cuda-cases "Catch2 [cuda] cases" "every case passes"
  check_row determinism "determinism control: the fp32 run twice" "bit-exact (else the bit-exact rows are inconclusive)"
  check_row bf16 "bf16-mixed" "losses within 5% relative of fp32"
  check_row fp16 "fp16-mixed + GradScaler, forced overflow" "same skipped steps and scales as torch.amp.GradScaler"
  check_row recompute "full checkpointing, dropout 0.1" "bit-exact against no checkpointing"
  check_row accumulation "accumulation 4 (micro-batch 4)" "within 1e-5 of micro-batch 16"
  check_row resume "resume at step 10 of 20" "bit-exact against uninterrupted"
  check_row offload "optimizer offload" "within 1e-5 of the device-only run"
  check_row zero3 "zero3 at world 1 under frugal launch" "within 1e-6 of the plain run"
  check_row hsdp "hsdp at world 1 under frugal launch (its shard group a process group of its own)" "within 1e-6 of the plain run"
  check_row offload-params "zero3 + params + optimizer offload" "within 1e-5 of the plain run"
  check_row offload-nvme "optimizer state on disk (offload.optimizer nvme)" "bit-exact against optimizer offload in RAM"
  check_row checkpoint-async "asynchronous checkpoints (train.checkpoint_async)" "the final checkpoint, written in the background, bit-exact against the plain run's"
  check_row lora "LoRA (rank 8, all-linear), bf16-mixed" "losses within 5% relative of the CPU fp32 LoRA run"
  check_row qlora "QLoRA (NF4 base, width 128), bf16-mixed" "losses within 5% relative of the CPU fp32 QLoRA run"
  check_row nccl-cases "Catch2 [cuda][dist] cases (NCCL)" "every case passes"
  check_row crash "Catch2 [cuda][reliability]: SIGKILLs and resume" "1 trial; final state within 1e-3"
  check_row memory "peak allocated vs PyTorch (GPT-2 124M, T 256, B 8, fp32)" "at most 5% above"
  check_row snapshot "allocator snapshot in torch.cuda._memory_viz" "loads and plots"
  check_row oom "out of memory (absurd micro-batch)" "exit 2 with the report and advice"
  check_row find-batch "find-batch" "the size found trains; twice it runs out of memory"
  check_row generate "frugal generate: greedy, KV cache (tiny GPT, fp32)" "the same 28 ids as on the CPU"
  check_row generate-bandwidth "frugal generate speed (SmolLM2-360M shape, bf16, batch 1)" "MEASURED: tokens/s x weight bytes / 4.8 TB/s (goal >= 60%)"
else
  declare_bench_rows
fi
if [ $list = 1 ]; then
  for id in "${row_ids[@]}"; do echo "${row_title[$id]}"; done
  rm -rf "$work"
  exit 0
fi
trap 'finish "the check was stopped by a signal"; exit 1' INT TERM
trap 'finish; exit $?' EXIT

# --- 1. The machine ---------------------------------------------------------------------------
say "machine ($mode; deadline ${deadline_s} s)"
os=$(grep -h PRETTY_NAME /etc/os-release 2>/dev/null | cut -d'"' -f2)
machine_glibc=$(ldd --version 2>&1 | head -1 | grep -o '[0-9]*\.[0-9]*$' || true)
smi=$(timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
echo "${os:-$(uname -sr)}; glibc ${machine_glibc:-unknown}; cores: $(nproc); GPU: ${smi:-no nvidia-smi}"
# One import of torch for every question (each costs seconds): its version, CUDA, and where it
# lies (the bundle's launcher takes it from FRUGAL_GPU_TORCH_SITE instead of importing again).
setup_failed=""
torch_info=$(timeout 120 "$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__))); print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>"$logs/torch-import.log") ||
  setup_failed="$py cannot import torch (torch-import.log)"
export FRUGAL_GPU_TORCH_SITE=${torch_info%%$'\n'*}
torch_info=${torch_info#*$'\n'}
echo "$torch_info"
if [ "${torch_info##* }" = True ]; then
  dev=cuda
  gpu=${smi:-a CUDA device}
else
  dev=cpu
  gpu="no CUDA device: CPU dry run"
fi
{
  echo "## tools/gpu/check.sh ($mode), $(date -u +%Y-%m-%d), $gpu"
  echo
  echo "${os:-$(uname -sr)}, glibc ${machine_glibc:-unknown}; ${torch_info:-no torch}"
} >"$summary"

# --- 2. frugal: the bundle's binaries, or a source build --------------------------------------
# frugal / tests_bin / worker: the commands that run them (arrays: run_named needs executables).
how=""
if [ -z "$setup_failed" ] && [ $from_source = 0 ] && [ -x "$root/run" ] && [ -x "$root/bin/frugal" ]; then
  cat "$root/MANIFEST"
  # The bundle is tried first whatever glibc says: the MANIFEST's figure only explains a refusal.
  if timeout 60 "$root/run" bin/frugal --version >"$logs/bundle-load.log" 2>&1; then
    how="the bundle: $(head -1 "$logs/bundle-load.log")"
    frugal=("$root/run" bin/frugal)
    tests_bin=("$root/run" bin/frugal_tests)
  else
    needed=$(sed -n 's/^glibc needed: //p' "$root/MANIFEST")
    why=$(grep -v '^\s*$' "$logs/bundle-load.log" | tail -1)
    if [ -n "$needed" ] && [ -n "$machine_glibc" ] &&
      [ "$(printf '%s\n%s\n' "$needed" "$machine_glibc" | sort -V | head -1)" != "$needed" ]; then
      why="$why (this glibc $machine_glibc is older than the bundle's $needed)"
    fi
    echo "The bundle's frugal does not start here: $why; building from source." >>"$summary"
    say "the bundle's frugal does not start here: $why"
    from_source=1
  fi
elif [ -z "$setup_failed" ]; then
  from_source=1
fi
if [ -z "$setup_failed" ] && [ $from_source = 1 ]; then
  # The source tree: this one, or the bundle's source.tar.gz (with its third_party_gpu/).
  src=$root
  if [ -f "$root/source.tar.gz" ]; then
    src="$work/src"
    mkdir -p "$src" && tar -xzf "$root/source.tar.gz" -C "$src"
    [ -d "$root/third_party_gpu" ] && ln -s "$root/third_party_gpu" "$src/third_party_gpu"
  fi
  if [ ! -f "$src/tools/gpu/build_from_source.sh" ] || [ ! -f "$src/CMakeLists.txt" ]; then
    setup_failed="no usable bundle and no source tree to build (bundle-load.log)"
  elif [ ! -d "$src/third_party_gpu/debs" ]; then
    setup_failed="no usable bundle, and no third_party_gpu/ to build from source with (bundle-load.log)"
  else
    build="$src/build-gpu/build"
    if run_named source-build 600 bash "$src/tools/gpu/build_from_source.sh" "$py" "$logs"; then
      how="a source build"
      frugal=("$build/bin/frugal")
      tests_bin=(env FRUGAL_TEST_BINARY_DIR="$build" FRUGAL_TEST_SOURCE_DIR="$src" "$build/bin/frugal_tests")
    else
      setup_failed="the source build failed (source-build.log)"
    fi
  fi
fi
echo "frugal from ${how:-nowhere: $setup_failed}" >>"$summary"
{
  echo
  echo "| check | result | frugal | reference | criterion |"
  echo "|---|---|---|---|---|"
} >>"$summary"
say "frugal from ${how:-nowhere: $setup_failed}"

# NCCL's own words go to files of the logs, not the console; a rank's communicator set-up is
# bounded by the run's limit, its collectives by distributed.timeout_s.
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export NCCL_DEBUG_FILE=${NCCL_DEBUG_FILE:-$logs/nccl.%h.%p.log}

# --- 3. The check's rows ----------------------------------------------------------------------
# train NAME [ARGS...]: the tiny GPT on $dev, one record a step, in $runs/NAME; its metrics
# copied to the logs. No checkpoint unless a row reads one (--set train.save_final=true).
base=(configs/tiny-gpt.yaml --set run.dir="$runs" --set run.device="${dev:-cpu}" --set run.seed=7
      --set model.dropout=0.0 --set data.num_workers=0 --set train.max_steps=20
      --set train.log_every=1 --set train.eval_batches=0 --set train.progress=none
      --set generate.tokens=0 --set train.save_final=false)
train() {
  local name=$1 rc
  shift
  run_named "$name" "$run_limit" "${frugal[@]}" train "${base[@]}" --set run.name="$name" "$@"
  rc=$?
  [ -f "$runs/$name/metrics.jsonl" ] && cp "$runs/$name/metrics.jsonl" "$logs/metrics-$name.jsonl"
  return $rc
}
# launch NAME [ARGS...]: the same under `frugal launch --nproc-per-node 1` (NCCL on CUDA), with
# a short collective timeout.
launch() {
  local name=$1 rc
  shift
  run_named "$name" "$run_limit" "${frugal[@]}" launch --nproc-per-node 1 --master-port 0 -- train \
    "${base[@]}" --set run.name="$name" --set distributed.timeout_s=60 "$@"
  rc=$?
  [ -f "$runs/$name/metrics.jsonl" ] && cp "$runs/$name/metrics.jsonl" "$logs/metrics-$name.jsonl"
  return $rc
}
# exported NAME: the run's weights as a .pt (once: export never overwrites).
exported() {
  [ -f "$runs/$1.pt" ] || run_named "export-$1" 60 "${frugal[@]}" export "$runs/$1" --format pt -o "$runs/$1.pt"
}

# same_weights ID RUN REF TOLERANCE [NOTE]: the row ID from the exported weights of two runs
# (both trained with --set train.save_final=true). A tolerance-0 row that differs is
# INCONCLUSIVE when the determinism control did not pass: then the GPU itself does not repeat.
determinism=""
diff=""  # the last comparison's max abs diff
same_weights() {
  local id=$1 name=$2 ref=$3 tol=$4 note=${5:-}
  diff=""
  exported "$name" || { row "$id" "$(why_failed "export-$name" $?)"; return; }
  exported "$ref" || { row "$id" "$(why_failed "export-$ref" $?)" - "run '$ref'"; return; }
  if ! ask weights "$runs/$name.pt" "$runs/$ref.pt"; then
    row "$id" "FAIL (compare.py: $(field "$reply" error))" - "run '$ref'"
    return
  fi
  local d result
  d=$(field "$reply" max_abs_diff)
  diff=$d
  result=$(at_most "$d" "$tol")
  if [ "$result" = FAIL ] && [ "$tol" = 0 ] && [ "$id" != determinism ] && [ "$determinism" != PASS ]; then
    result="INCONCLUSIVE (differs, but the determinism control did not pass: the GPU does not repeat itself)"
  fi
  row "$id" "$result" "max abs diff $d${note:+; $note}" "run '$ref' ($(field "$reply" elements) values)" \
    "max abs diff <= $tol"
}
# trained NAME train|launch ARGS...: a run whose final checkpoint a row reads, once per check
# (several rows compare with the fp32 run); a failure is remembered too, not paid for again.
trained() {
  local name=$1 how=$2 rc
  shift 2
  if [ -f "$runs/$name.result" ]; then
    read -r rc stopped <"$runs/$name.result"
    return "$rc"
  fi
  $how "$name" --set train.save_final=true "$@"
  rc=$?
  echo "$rc $stopped" >"$runs/$name.result"
  return $rc
}

# frugal loads torch's CUDA libraries itself, where it sees an NVIDIA driver (docs/gpu.md,
# "Loading CUDA"): the first thing to know when every other row fails.
row_cuda_load() {
  run_named doctor 60 "${frugal[@]}" doctor || { row cuda-load "$(why_failed doctor $?)"; return; }
  local libs gpu
  libs=$(sed -n 's/^[a-z]* *CUDA libraries  *//p' "$logs/doctor.log" | head -1)
  gpu=$(sed -n 's/^[a-z]* *GPU 0  *//p' "$logs/doctor.log" | head -1)
  if [ "$dev" = cpu ]; then
    row cuda-load "SKIPPED (no CUDA: doctor says '${libs:-nothing}')" "${libs:--}"
  elif [[ $libs == loaded\ from* ]] && [ -n "$gpu" ]; then
    row cuda-load PASS "$libs; GPU 0: $gpu" "nvidia-smi: ${smi:-none}"
  else
    row cuda-load "FAIL (doctor says '${libs:-nothing}', GPU 0 '${gpu:-none}'; doctor.log)" "${libs:--}" \
      "nvidia-smi: ${smi:-none}"
  fi
}

row_fp32() {
  trained fp32 train || { row fp32 "$(why_failed fp32 $?)"; return; }
  trained fp32-cpu train --set run.device=cpu || { row fp32 "$(why_failed fp32-cpu $? reference)"; return; }
  if ! ask losses "$logs/metrics-fp32.jsonl" "$logs/metrics-fp32-cpu.jsonl"; then
    row fp32 "FAIL (compare.py: $(field "$reply" error))"
    return
  fi
  local d
  d=$(field "$reply" max_rel_diff)
  row fp32 "$(at_most "$d" 1e-4)" "final loss $(field "$reply" final_a) on $dev" \
    "CPU run: $(field "$reply" final_b)" "losses of 20 steps within 1e-4 relative ($d)"
}

# catch2 ID FILTER NAME [ENV...]: a set of the test binary's cases, with a JUnit report; failed
# cases by name. Exit 77 (every case skipped) is a skip only where Python sees no GPU either.
catch2() {
  local id=$1 filter=$2 name=$3 rc
  shift 3
  run_named "$name" 150 env "$@" "${tests_bin[@]}" "$filter" -r junit -o "$logs/$name.xml"
  rc=$?
  local counts
  counts=$("$py" - "$logs/$name.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    cases = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
except Exception:
    print("0\t0\t0\t"); sys.exit()
failed = [c.get("name", "?") for c in cases if c.find("failure") is not None or c.find("error") is not None]
skipped = sum("SKIPPED: " in "".join(o.text or "" for o in c.iter("system-out")) for c in cases)
print(f"{len(cases)}\t{len(failed)}\t{skipped}\t{'; '.join(failed)}")
PY
)
  local n f s names
  IFS=$'\t' read -r n f s names <<<"$counts"
  if [ $rc = 77 ] && [ "$dev" = cpu ]; then
    row "$id" "SKIPPED (no CUDA: $s of $n cases skipped)" "$n cases" "their own references"
  elif [ $rc = 77 ]; then
    row "$id" "FAIL (the test binary saw no CUDA where Python does: $s of $n skipped)" "$n cases"
  elif [ $rc = 0 ]; then
    row "$id" PASS "$n cases, $s skipped" "their own references (CPU runs, plain steps)"
  elif [ $rc = 124 ]; then
    row "$id" "$(why_failed "$name" $rc)" "$n cases reported${names:+; failed: $names}"
  else
    row "$id" "FAIL ($f of $n failed${names:+: $names}; $name.log)" "$n cases, $s skipped"
  fi
}
row_cuda_cases() { catch2 cuda-cases "[cuda]~[dist]~[reliability]" tests-cuda; }
row_nccl_cases() { catch2 nccl-cases "[cuda][dist]" tests-nccl; }
row_crash() { catch2 crash "[cuda][reliability]" tests-crash FRUGAL_CRASH_TRIALS=1; }

row_determinism() {
  trained fp32 train || { row determinism "$(why_failed fp32 $?)"; return; }
  trained fp32-again train || { row determinism "$(why_failed fp32-again $?)"; return; }
  same_weights determinism fp32-again fp32 0
  [ -n "$diff" ] && determinism=$(at_most "$diff" 0)
}

row_bf16() {
  trained fp32 train || { row bf16 "$(why_failed fp32 $? reference)"; return; }
  train bf16 --set strategy.precision=bf16-mixed || { row bf16 "$(why_failed bf16 $?)"; return; }
  ask losses "$logs/metrics-bf16.jsonl" "$logs/metrics-fp32.jsonl" ||
    { row bf16 "FAIL (compare.py: $(field "$reply" error))"; return; }
  local d
  d=$(field "$reply" max_rel_diff)
  row bf16 "$(at_most "$d" 0.05)" "final loss $(field "$reply" final_a)" "fp32 run: $(field "$reply" final_b)" \
    "losses within 5% relative ($d)"
}

row_fp16() {
  # An initial scale of 2^24 overflows fp16 for the first steps: each must be skipped and the
  # scale halved, as torch.amp.GradScaler does; growth every 4 clean steps after that.
  [ "$dev" = cuda ] || { row fp16 "SKIPPED (no CUDA: fp16 autocast is CUDA's)"; return; }
  train fp16 --set strategy.precision=fp16-mixed --set strategy.grad_scaler.init_scale=16777216 \
    --set strategy.grad_scaler.growth_interval=4 || { row fp16 "$(why_failed fp16 $?)"; return; }
  # (a CUDA process of its own: the comparer stays on the CPU)
  local j
  j=$(run_named compare-scaler 90 "$py" tools/gpu/reference/compare.py scaler "$logs/metrics-fp16.jsonl" 16777216 4;
      grep '^{' "$logs/compare-scaler.log" | tail -1)
  local sk mm
  sk=$(field "$j" skipped_frugal) mm=$(field "$j" mismatches)
  if [ -z "$sk" ]; then row fp16 "FAIL (compare.py scaler; compare-scaler.log)"; return; fi
  local result=FAIL
  [ "$sk" -gt 0 ] 2>/dev/null && [ "$mm" = "[]" ] && result=PASS
  row fp16 "$result" "$sk steps skipped" \
    "torch.amp.GradScaler: $(field "$j" skipped_python) skipped, final scale $(field "$j" final_scale_python)${mm:+; mismatches $mm}"
}

row_recompute() {
  trained drop-none train --set model.dropout=0.1 || { row recompute "$(why_failed drop-none $? reference)"; return; }
  trained drop-full train --set model.dropout=0.1 --set strategy.checkpointing=full ||
    { row recompute "$(why_failed drop-full $?)"; return; }
  same_weights recompute drop-full drop-none 0
}

row_accumulation() {
  trained acc1 train --set data.micro_batch_size=16 || { row accumulation "$(why_failed acc1 $? reference)"; return; }
  trained acc4 train --set data.micro_batch_size=4 --set strategy.accumulation=4 ||
    { row accumulation "$(why_failed acc4 $?)"; return; }
  same_weights accumulation acc4 acc1 1e-5
}

row_resume() {
  trained fp32 train || { row resume "$(why_failed fp32 $? reference)"; return; }
  train resumed --set train.max_steps=10 --set train.save_final=true || { row resume "$(why_failed resumed $?)"; return; }
  train resumed-2 --set run.name=resumed --set run.resume=auto --set train.save_final=true ||
    { row resume "$(why_failed resumed-2 $?)"; return; }
  same_weights resume resumed fp32 0
}

# pinning NAME: which host memory optimizer offload used, from the run's log.
pinning() {
  local said
  said=$(sed -n 's/.*offload host memory: \(.*\)$/\1/p' "$logs/$1.log" | head -1)
  [ "$dev" = cuda ] || said="plain (no CUDA)"
  echo "${said:-not said in $1.log}"
}
row_offload() {
  trained fp32 train || { row offload "$(why_failed fp32 $? reference)"; return; }
  trained offload-opt train --set strategy.offload.optimizer=true || { row offload "$(why_failed offload-opt $?)"; return; }
  # 1e-5, not bit-exact: the host step is the CPU's AdamW, whose rounding differs from CUDA's
  # kernels (4.8e-6 after 20 steps on an H200, 2026-12-04); a wrong step is off by ~1e-3.
  same_weights offload offload-opt fp32 1e-5 "host memory: $(pinning offload-opt)"
}

row_zero3() {
  trained fp32 train || { row zero3 "$(why_failed fp32 $? reference)"; return; }
  trained zero3 launch --set strategy.sharding=zero3 || { row zero3 "$(why_failed zero3 $?)"; return; }
  same_weights zero3 zero3 fp32 1e-6 "$([ "$dev" = cuda ] && echo NCCL || echo Gloo)"
}

# hsdp on one GPU: its shard group (one node's ranks) is made as a process group of its own
# (NCCL on CUDA); no replicas at world 1. Several GPUs and nodes stay unverified (docs/gpu.md).
row_hsdp() {
  trained fp32 train || { row hsdp "$(why_failed fp32 $? reference)"; return; }
  trained hsdp launch --set strategy.sharding.mode=hsdp || { row hsdp "$(why_failed hsdp $?)"; return; }
  same_weights hsdp hsdp fp32 1e-6 "$([ "$dev" = cuda ] && echo NCCL || echo Gloo)"
}

row_offload_params() {
  trained fp32 train || { row offload-params "$(why_failed fp32 $? reference)"; return; }
  trained offload-params launch --set strategy.sharding=zero3 --set strategy.offload.optimizer=true \
    --set strategy.offload.params=true || { row offload-params "$(why_failed offload-params $?)"; return; }
  same_weights offload-params offload-params fp32 1e-5 "host memory: $(pinning offload-params)"
}

# The masters and Adam's moments in a scratch file on the machine's disk, streamed through a
# small ring (several records per step), page-locked on CUDA: the same host step on the same
# values as RAM offload.
row_offload_nvme() {
  trained offload-opt train --set strategy.offload.optimizer=true || { row offload-nvme "$(why_failed offload-opt $? reference)"; return; }
  mkdir -p "$work/nvme"
  trained offload-nvme train --set strategy.offload.optimizer=nvme --set strategy.offload.nvme_path="$work/nvme" \
    --set strategy.offload.buffer_mb=0.5 || { row offload-nvme "$(why_failed offload-nvme $?)"; return; }
  local how
  how=$(grep -o "refuses O_DIRECT" "$logs/offload-nvme.log" | head -1)
  same_weights offload-nvme offload-nvme offload-opt 0 "${how:-O_DIRECT}; ring: $(pinning offload-nvme)"
}

# Checkpoints copied from the device to host memory and written by a background thread while
# training goes on; the exported weights are read from the final one, written that way.
row_checkpoint_async() {
  trained fp32 train || { row checkpoint-async "$(why_failed fp32 $? reference)"; return; }
  trained ckpt-async train --set train.checkpoint_async=true --set train.checkpoint_every=5 ||
    { row checkpoint-async "$(why_failed ckpt-async $?)"; return; }
  local bg
  bg=$(grep -c "written in the background" "$logs/ckpt-async.log" || true)
  same_weights checkpoint-async ckpt-async fp32 0 "$bg published in the background"
}

# finetune_row ID ARGS...: the tiny GPT fine-tuned as ARGS say, bf16-mixed on the device
# against the same in fp32 on the CPU (the adapters' products and NF4's dequantization run on
# the GPU's kernels).
finetune_row() {
  local id=$1
  shift
  train "$id-cpu" --set run.device=cpu "$@" || { row "$id" "$(why_failed "$id-cpu" $? reference)"; return; }
  train "$id" --set strategy.precision=bf16-mixed "$@" || { row "$id" "$(why_failed "$id" $?)"; return; }
  ask losses "$logs/metrics-$id.jsonl" "$logs/metrics-$id-cpu.jsonl" ||
    { row "$id" "FAIL (compare.py: $(field "$reply" error))"; return; }
  local d
  d=$(field "$reply" max_rel_diff)
  row "$id" "$(at_most "$d" 0.05)" "final loss $(field "$reply" final_a)" \
    "CPU fp32 run: $(field "$reply" final_b)" "losses within 5% relative ($d)"
}
row_lora() {
  finetune_row lora --set model.lora.rank=8 --set model.lora.targets=all-linear --set optim.lr=0.01
}
# Width 128: every projection's weight a multiple of NF4's 16384 values.
row_qlora() {
  finetune_row qlora --set model.n_embd=128 --set model.n_head=4 --set model.lora.rank=8 \
    --set model.lora.targets=all-linear --set model.quantize_base=nf4 --set optim.lr=0.01
}

# GPT-2 124M's shape, smaller context, fp32 and AdamW: frugal's peak (metrics) against
# torch.cuda.max_memory_allocated of the same model and batch in Python.
mem_set=(--set model.size=gpt2-124m --set model.block_size=256 --set data.micro_batch_size=8
         --set train.max_steps=3 --set data.synthetic_samples=64 --set model.kernels=aten)
row_memory() {
  [ "$dev" = cuda ] || { row memory "SKIPPED (no CUDA: CPU peaks are bench/strategies')"; return; }
  train mem "${mem_set[@]}" --set memory.record_history=true || { row memory "$(why_failed mem $?)"; return; }
  local f_peak model_json j p_peak
  f_peak=$("$py" -c "import json, sys; print(max(json.loads(l).get('mem_allocated_peak_bytes', 0) for l in open(sys.argv[1])))" \
    "$logs/metrics-mem.jsonl" 2>/dev/null)
  model_json=$(timeout 60 "${frugal[@]}" config show "${base[@]}" "${mem_set[@]}" 2>/dev/null | awk -f bench/gpu/model_json.awk)
  j=$(run_named compare-memory 90 "$py" tools/gpu/reference/compare.py memory "$model_json" 8 3;
      grep '^{' "$logs/compare-memory.log" | tail -1)
  p_peak=$(field "$j" peak_bytes)
  if [ -z "$p_peak" ]; then row memory "FAIL (the PyTorch reference gave no peak; compare-memory.log)" "$f_peak bytes"; return; fi
  local ratio
  ratio=$(awk -v a="$f_peak" -v b="$p_peak" 'BEGIN { if (b > 0 && a ~ /^[0-9]+$/) printf "%.4f", a / b - 1 }')
  local result=FAIL
  # Below PyTorch's peak passes: less memory is the point (frugal peaked 9% lower on an H200).
  [ -n "$ratio" ] && result=$(awk -v r="$ratio" 'BEGIN { print (r <= 0.05) ? "PASS" : "FAIL" }')
  row memory "$result" "$(awk -v a="$f_peak" 'BEGIN { printf "%.0f MiB", a / 1048576 }')" \
    "torch.cuda.max_memory_allocated: $(awk -v a="$p_peak" 'BEGIN { printf "%.0f MiB", a / 1048576 }')" \
    "at most 5% above (${ratio:-no ratio})"
}

row_snapshot() {
  [ "$dev" = cuda ] || { row snapshot "SKIPPED (no CUDA: no allocator history)"; return; }
  local snap="$runs/mem/memory_snapshot.pickle"
  [ -f "$snap" ] || { row snapshot "FAIL (no memory_snapshot.pickle from the memory row's run)"; return; }
  ask snapshot "$snap" || { row snapshot "FAIL (compare.py: $(field "$reply" error))"; return; }
  local n
  n=$(field "$reply" trace_events)
  row snapshot "$([ "${n:-0}" -gt 0 ] 2>/dev/null && echo PASS || echo FAIL)" \
    "$n trace events, $(field "$reply" segments) segments" "trace_plot: $(field "$reply" html_bytes) bytes of HTML"
}

row_oom() {
  # An absurd micro-batch on CUDA; on the CPU the same through a budget.
  local set=(--set model.size=gpt2-124m --set model.block_size=1024 --set data.micro_batch_size=512 --set data.synthetic_samples=1024)
  [ "$dev" = cpu ] && set=(--set data.micro_batch_size=64 --set data.synthetic_samples=256 --set memory.budget=4MiB)
  train oom "${set[@]}"
  local rc=$?
  if [ $rc = 124 ]; then row oom "$(why_failed oom $rc)"; return; fi
  local advice
  advice=$(grep -c "would save" "$logs/oom.log")
  if [ $rc = 2 ] && grep -q "out of memory in step" "$logs/oom.log" && [ "$advice" -gt 0 ]; then
    row oom PASS "exit 2, $advice advice lines" "a clean exit 2"
  else
    row oom "FAIL (exit $rc, $advice advice lines; oom.log)" "exit $rc" "a clean exit 2"
  fi
}

row_find_batch() {
  local set=(--set model.size=gpt2-124m --set model.block_size=512 --set data.synthetic_samples=4096)
  [ "$dev" = cpu ] && set=(--set data.synthetic_samples=1024 --set memory.budget=24MiB)
  run_named find-batch 120 "${frugal[@]}" find-batch "${base[@]}" --set run.name=fb "${set[@]}" --max-batch 512 \
    -o "$work/fitted.yaml" || { row find-batch "$(why_failed find-batch $?)"; return; }
  local b fit twice
  b=$(awk '/^data:/ {d=1; next} /^[a-z]/ {d=0} d && $1 == "micro_batch_size:" {print $2}' "$work/fitted.yaml")
  [[ $b =~ ^[0-9]+$ ]] || { row find-batch "FAIL (no micro_batch_size in the written config)"; return; }
  run_named fb-fit "$run_limit" "${frugal[@]}" train "$work/fitted.yaml" --set run.name=fb-fit --set train.max_steps=2
  fit=$?
  [ $fit = 124 ] && { row find-batch "$(why_failed fb-fit $fit)"; return; }
  run_named fb-twice "$run_limit" "${frugal[@]}" train "$work/fitted.yaml" --set run.name=fb-twice --set train.max_steps=2 \
    --set data.micro_batch_size=$((2 * b))
  twice=$?
  [ $twice = 124 ] && { row find-batch "$(why_failed fb-twice $twice)"; return; }
  row find-batch "$([ $fit = 0 ] && [ $twice = 2 ] && echo PASS || echo "FAIL (exit $fit, then $twice)")" \
    "micro-batch $b: exit $fit" "micro-batch $((2 * b)): exit $twice"
}

# json_of NAME: the last JSON line of a command's log.
json_of() { grep '^{' "$logs/$1.log" | tail -1; }

row_generate() {
  trained fp32 train || { row generate "$(why_failed fp32 $? reference)"; return; }
  # (the tiny GPT's context is 32 tokens)
  local gen=(generate "$runs/fp32" --prompt-ids 10,20,30,40 --max-new-tokens 28 --dtype fp32 --ids)
  run_named generate-dev 60 "${frugal[@]}" "${gen[@]}" --device "$dev" || { row generate "$(why_failed generate-dev $?)"; return; }
  run_named generate-cpu 60 "${frugal[@]}" "${gen[@]}" --device cpu || { row generate "$(why_failed generate-cpu $? reference)"; return; }
  local a b speed
  a=$(field "$(json_of generate-dev)" tokens) b=$(field "$(json_of generate-cpu)" tokens)
  speed=$(sed -n 's/^generate: \([0-9]* tokens in [0-9.]* s ([0-9.]* tokens\/s\).*/\1)/p' "$logs/generate-dev.log")
  row generate "$([ -n "$a" ] && [ "$a" = "$b" ] && echo PASS || echo "FAIL (generate-dev.log, generate-cpu.log)")" \
    "${speed:-no speed line} on $dev" "the CPU's ids" "the same 28 greedy ids"
}

# The decoding speed of a model large enough for the weights' reads to matter: a random
# SmolLM2-360M-shaped Llama (one optimizer step, saved), 256 new tokens in bf16.
row_generate_bandwidth() {
  [ "$dev" = cuda ] || { row generate-bandwidth "SKIPPED (no CUDA: the CPU's speed is bench/generate's)"; return; }
  trained gen-360m train --set model.size=smollm2-360m --set model.block_size=512 \
    --set data.micro_batch_size=1 --set train.max_steps=1 --set data.synthetic_samples=8 ||
    { row generate-bandwidth "$(why_failed gen-360m $?)"; return; }
  run_named generate-360m 90 "${frugal[@]}" generate "$runs/gen-360m" --prompt-ids 1,2,3,4,5,6,7,8 \
    --max-new-tokens 256 --dtype bf16 --ids || { row generate-bandwidth "$(why_failed generate-360m $?)"; return; }
  local rate params share
  rate=$(sed -n 's/.* then \([0-9.]*\) tokens\/s.*/\1/p' "$logs/generate-360m.log" | tail -1)
  # "model llama: 361.821M parameters on cuda"
  params=$(sed -n 's/.*model [a-z0-9]*: \([0-9.]*\)M parameters.*/\1/p' "$logs/gen-360m.log" | head -1)
  share=$(awk -v r="$rate" -v p="$params" 'BEGIN { if (r > 0 && p > 0) printf "%.1f%%", 100 * r * 2 * p * 1e6 / 4.8e12 }')
  row generate-bandwidth "MEASURED" "${rate:-?} tokens/s after the prompt" "${params:-?}M bf16 weights" \
    "${share:-no rate}: tokens/s x weight bytes / 4.8 TB/s (goal >= 60%)"
}

run_rows

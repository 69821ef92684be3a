# The GPT-2 124M bf16 benchmark as rows of tools/gpu/check.sh's table (check.sh --bench, which
# sources this after tools/gpu/lib.sh): frugal against Python PyTorch from the same wheel, same
# weights (exported from frugal), same batch shape: tokens/s, MFU against the measured bf16
# matmul rate, peak memory and the memory resident between steps; without and with full
# activation checkpointing, frugal with optimizer offload (against its own device-only row), and
# torch.compile. The eager reference runs first; each run may fail alone (its row says so, the
# others keep their figures); torch.compile runs last with the time left. On a machine without
# CUDA (the dry run) the same rows run a tiny GPT on the CPU.

declare_bench_rows() {
  check_row bench-eager "PyTorch eager, checkpointing none (the reference)" "figures"
  check_row bench-none "frugal, checkpointing none" "figures, against eager"
  check_row bench-full "frugal, checkpointing full" "figures, against eager with torch.utils.checkpoint"
  check_row bench-offload "frugal, optimizer offload" "step time <= 1.5x the device-only step"
  check_row bench-compile "PyTorch torch.compile (with the time left)" "figures"
}

bench_cfg=bench/gpu/gpt2-124m.yaml
bench_steps=${FRUGAL_GPU_STEPS:-20}
# The dry run on a CPU: the same rows, a tiny GPT, a few steps.
bench_cpu=(--set run.device=cpu --set model.size=gpt-tiny --set data.micro_batch_size=4)
bench_set() { [ "$dev" = cuda ] || printf '%s\n' "${bench_cpu[@]}"; }

# bench_frugal ROW [ARGS...]: frugal's run ROW of the benchmark; its figures in $logs/ROW.json.
bench_frugal() {
  local name=$1 rc
  shift
  local extra
  mapfile -t extra < <(bench_set)
  run_named "$name" 120 "${frugal[@]}" train "$bench_cfg" --set run.dir="$runs" --set run.name="$name" \
    --set train.max_steps="$bench_steps" --set train.save_final=false "${extra[@]}" "$@"
  rc=$?
  [ $rc = 0 ] || return $rc
  cp "$runs/$name/metrics.jsonl" "$logs/$name.metrics.jsonl"
  "$py" bench/gpu/figures.py frugal "$logs/$name.metrics.jsonl" >"$logs/$name.json" 2>>"$logs/$name.log"
}
# bench_python NAME POLICY [LIMIT]: the Python side (none | full | compile) into $logs/NAME.json.
bench_python() {
  local name=$1 policy=$2 limit=${3:-120}
  [ -f "$runs/w.pt" ] || { echo "no exported weights (the reference's init run failed)" >>"$logs/$name.log"; return 1; }
  if injected nojson "$name"; then
    echo "injected: no JSON (FRUGAL_GPU_INJECT)" >>"$logs/$name.log"
    return 0
  fi
  run_named "$name" "$limit" "$py" bench/gpu/python_gpt2.py "$bench_model" "$runs/w.pt" "$policy" \
    "$bench_steps" "$bench_batch" "$dev" || return $?
  grep '^{' "$logs/$name.log" | tail -1 >"$logs/$name.json"
}
# bench_cells NAME [REFERENCE]: a row's frugal and reference cells from the JSON figures, or a
# FAIL naming what is missing (printed: RESULT<tab>FRUGAL<tab>REFERENCE).
bench_cells() {
  "$py" bench/gpu/figures.py cells "$bench_model" "$logs/python-none.json" "$logs/$1.json" "${2:+$logs/$2.json}"
}
# bench_row ID NAME REFERENCE [PREFIX] [REFERENCE_FAILURE]: MEASURED with both cells, or the
# FAIL; a reference that failed (REFERENCE_FAILURE, why_failed's words) fails the row but
# keeps frugal's figures in it.
bench_row() {
  local id=$1 ref=$3 result a b
  [ -n "${5:-}" ] && ref=""
  IFS=$'\t' read -r result a b < <(bench_cells "$2" "$ref")
  [ -n "${5:-}" ] && result=$5 b="-"
  row "$id" "${result:-FAIL (figures.py gave nothing)}" "$a" "${4:-}$b"
}

row_bench_eager() {
  local extra
  mapfile -t extra < <(bench_set)
  # The model's sizes for the Python side (which has no YAML parser there).
  bench_model=$(timeout 60 "${frugal[@]}" config show "$bench_cfg" "${extra[@]}" 2>/dev/null | awk -f bench/gpu/model_json.awk)
  bench_batch=$(timeout 60 "${frugal[@]}" config show "$bench_cfg" "${extra[@]}" 2>/dev/null |
    awk '/^data:/ {d=1; next} /^[a-z]/ {d=0} d && $1 == "micro_batch_size:" {print $2}')
  # Initial weights for both sides: one step of plain SGD (no optimizer state in the checkpoint),
  # exported.
  run_named bench-init 120 "${frugal[@]}" train "$bench_cfg" --set run.dir="$runs" --set run.name=bench-init \
    --set train.max_steps=1 --set optim.type=sgd "${extra[@]}" &&
    run_named bench-export 120 "${frugal[@]}" export "$runs/bench-init" --format pt -o "$runs/w.pt" ||
    { row bench-eager "$(why_failed bench-init $?)"; return; }
  bench_python python-none none || { row bench-eager "$(why_failed python-none $?)"; return; }
  bench_row bench-eager python-none ""
}
row_bench_none() {
  bench_frugal frugal-none --set strategy.checkpointing.policy=none || { row bench-none "$(why_failed frugal-none $?)"; return; }
  bench_row bench-none frugal-none python-none "eager: "
}
row_bench_full() {
  bench_frugal frugal-full --set strategy.checkpointing.policy=full || { row bench-full "$(why_failed frugal-full $?)"; return; }
  local failed=""
  bench_python python-full full || failed=$(why_failed python-full $? reference)
  bench_row bench-full frugal-full python-full "eager + checkpointing: " "$failed"
}
row_bench_offload() {
  bench_frugal frugal-offload --set strategy.offload.optimizer=true || { row bench-offload "$(why_failed frugal-offload $?)"; return; }
  local result a b
  IFS=$'\t' read -r result a b < <("$py" bench/gpu/figures.py offload "$logs/frugal-offload.json" "$logs/frugal-none.json")
  row bench-offload "${result:-FAIL (figures.py gave nothing)}" "$a; host memory: $(pinning frugal-offload)" "$b"
}
row_bench_compile() {
  # Last, with what the deadline leaves (its compilation alone may take a minute).
  local limit=$(($(left_s) - reserve_s))
  [ $limit -ge 30 ] || { row bench-compile "SKIPPED (time: ${limit} s left before the deadline)"; return; }
  bench_python python-compile compile $limit || { row bench-compile "$(why_failed python-compile $?)"; return; }
  bench_row bench-compile python-compile ""
}

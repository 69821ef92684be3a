# The GPU check's harness, sourced by tools/gpu/check.sh (and the benchmark's rows,
# bench/gpu/rows.sh): rows written to summary.md as they finish, every command under its own
# time limit and the check's deadline, logs packed into $OUT/logs.tar.gz after every row, faults
# injected by name for the dry runs that test all this (tests/integration/test_gpu_bundle.cpp).
#
# A GPU machine is lent for minutes, once: whatever happens (a hang, a crash, a missing file, a
# command killed at its limit), the call must come back with a summary that has one row per
# check, each PASS, FAIL, SKIPPED, INCONCLUSIVE or MEASURED, and the logs that explain it.
#
# Expects: OUT, work (a private folder), t0 (start, epoch seconds), deadline_s, py.

logs="$work/logs"
runs="$work/runs"
mkdir -p "$logs" "$runs"
summary="$OUT/summary.md"
reserve_s=15  # kept back from the deadline for the last rows' bookkeeping and the archive

say() { printf '[gpu-check %4ss] %s\n' "$(($(date +%s) - t0))" "$*"; }
left_s() { echo $((t0 + deadline_s - $(date +%s))); }

# --- Faults injected by name (FRUGAL_GPU_INJECT="hang=NAME fail=NAME nojson=NAME ..."): the
#     named run hangs (and is stopped by its limit: FRUGAL_GPU_HANG_LIMIT seconds when set, so
#     that a dry run need not wait a healthy run's limit), fails at once, or (a benchmark's
#     Python run) writes no JSON. Only for the dry runs that show a fault still yields a whole
#     summary.
injected() {  # injected KIND NAME: true when FRUGAL_GPU_INJECT asks for it
  local item
  for item in ${FRUGAL_GPU_INJECT:-}; do
    [ "$item" = "$1=$2" ] && return 0
  done
  return 1
}

# run_named NAME LIMIT CMD...: runs CMD (an executable, not a shell function), its output
# appended to $logs/NAME.log, for at most LIMIT seconds, or what is left before the deadline.
# Returns CMD's exit status; 124 when it was stopped. Sets `stopped`: "" when it ended by itself,
# "limit" when its own limit stopped it, "deadline" when the deadline did (or left no time to
# start it).
stopped=""
run_named() {
  local name=$1 limit=$2
  shift 2
  local avail=$(($(left_s) - reserve_s)) t=$limit rc
  stopped=""
  if [ "$avail" -lt 5 ]; then
    stopped=deadline
    echo "[gpu-check] not started: the deadline" >>"$logs/$name.log"
    return 124
  fi
  [ "$avail" -lt "$t" ] && t=$avail
  local cmd=("$@")
  if injected hang "$name"; then
    cmd=(sleep 100000)
    if [ -n "${FRUGAL_GPU_HANG_LIMIT:-}" ] && [ "$FRUGAL_GPU_HANG_LIMIT" -lt "$t" ]; then
      t=$FRUGAL_GPU_HANG_LIMIT limit=$FRUGAL_GPU_HANG_LIMIT
    fi
  fi
  if injected fail "$name"; then cmd=(sh -c 'echo "injected failure (FRUGAL_GPU_INJECT)" >&2; exit 1'); fi
  echo "[gpu-check] $(date -u +%H:%M:%S) limit ${t} s: ${cmd[*]}" >>"$logs/$name.log"
  # (timeout runs CMD in a process group of its own and stops the whole group: a launcher's
  #  ranks and a test's children go with it)
  timeout -k 5 "$t" "${cmd[@]}" >>"$logs/$name.log" 2>&1
  rc=$?
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    if [ "$t" -lt "$limit" ]; then stopped=deadline; else stopped=limit; fi
    echo "[gpu-check] stopped after ${t} s ($stopped)" >>"$logs/$name.log"
    say "$name: stopped after ${t} s ($stopped)"
    rc=124
  fi
  return $rc
}

# why_failed NAME RC [reference]: the result of a run that did not succeed, in words ("reference"
# when NAME was the row's reference run: its failure fails the row too).
why_failed() {
  local name=$1 rc=$2 ref=${3:+reference: }
  if [ "$rc" = 124 ] && [ "$stopped" = deadline ]; then
    echo "SKIPPED (time: ${ref}stopped at the check's ${deadline_s} s deadline; $name.log)"
  elif [ "$rc" = 124 ]; then
    echo "FAIL (timeout: ${ref}$name stopped at its limit; $name.log)"
  else
    echo "FAIL (${ref}$name exited with $rc; $name.log)"
  fi
}

# --- The comparer: one Python process (tools/gpu/reference/compare.py serve) answers every
#     CPU-side comparison, so that torch is imported once, not once a row.
cmp_pid=""
reply=""
# ask SUBCOMMAND ARGS...: compare.py's JSON answer in `reply` (not printed: the comparer must
# live in this shell, not in a command substitution's); fails on an error answer or a hang.
ask() {
  reply=""
  if [ -z "$cmp_pid" ] || ! kill -0 "$cmp_pid" 2>/dev/null; then
    coproc CMP { exec "$py" -u "$root/tools/gpu/reference/compare.py" serve 2>>"$logs/compare.err"; }
    cmp_pid=$CMP_PID
    cmp_in=${CMP[1]} cmp_out=${CMP[0]}
  fi
  local IFS=$'\t'
  printf '%s\n' "$*" >&"$cmp_in" 2>/dev/null || { cmp_stop; return 1; }
  # (torch's import on the first question: up to a minute on a slow file system)
  if ! IFS= read -r -t "${FRUGAL_GPU_COMPARE_TIMEOUT:-90}" reply <&"$cmp_out"; then
    echo "[gpu-check] compare.py gave no answer to: $*" >>"$logs/compare.err"
    cmp_stop
    reply='{"error": "compare.py gave no answer (compare.err)"}'
    return 1
  fi
  case $reply in *'"error"'*) return 1 ;; esac
}
cmp_stop() {
  [ -n "$cmp_pid" ] && kill "$cmp_pid" 2>/dev/null
  cmp_pid=""
}
# field JSON KEY: one value of a JSON object ("" when it is not there).
field() { "$py" -c 'import json, sys
try: v = json.loads(sys.argv[1]).get(sys.argv[2], "")
except Exception: v = ""
print(v)' "$1" "$2"; }
# at_most VALUE LIMIT: PASS or FAIL (a VALUE that is not a number is a FAIL).
at_most() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    if (a ~ /^[-+]?[0-9.]+([eE][-+]?[0-9]+)?$/ && a + 0 <= b + 0) print "PASS"; else print "FAIL" }'
}

# --- Rows ---------------------------------------------------------------------------------------
# Each check has an id, a title and a criterion, declared in order (check_row) before any runs,
# so that the summary always has every row: one that never ran says SKIPPED and why.
declare -a row_ids=()
declare -A row_title=() row_criterion=() row_done=()
n_fail=0 n_inconclusive=0 n_skipped=0
check_row() { row_ids+=("$1"); row_title[$1]=$2; row_criterion[$1]=$3; }

cell() {  # one table cell: no pipes, no line breaks, never empty
  local s=${1//$'\n'/ }
  s=${s//|/\/}
  printf '%s' "${s:--}"
}
# row ID RESULT [FRUGAL] [REFERENCE] [CRITERION]: appends the row to summary.md at once.
row() {
  local id=$1 result=$2
  if [ -n "${row_done[$id]:-}" ]; then say "internal: row $id given twice (kept the first)"; return; fi
  if [ -z "${row_title[$id]:-}" ]; then say "internal: no row $id"; return; fi
  case $result in
    PASS | MEASURED | PASS\ \(* | MEASURED\ \(*) ;;
    FAIL | FAIL\ \(*) n_fail=$((n_fail + 1)) ;;
    INCONCLUSIVE\ \(*) n_inconclusive=$((n_inconclusive + 1)) ;;
    SKIPPED\ \(*) n_skipped=$((n_skipped + 1)) ;;
    *) result="FAIL (no result: '$result')"; n_fail=$((n_fail + 1)) ;;
  esac
  row_done[$id]=1
  printf '| %s | %s | %s | %s | %s |\n' "$(cell "${row_title[$id]}")" "$(cell "$result")" \
    "$(cell "${3:-}")" "$(cell "${4:-}")" "$(cell "${5:-${row_criterion[$id]}}")" >>"$summary"
  say "${row_title[$id]}: $result"
  pack
}

# run_rows: each declared row in order (function row_ID, dashes as underscores), while the
# deadline leaves time; the rest SKIPPED.
run_rows() {
  local id
  for id in "${row_ids[@]}"; do
    if [ -n "${setup_failed:-}" ]; then
      row "$id" "SKIPPED (set-up failed: $setup_failed)"
    elif [ "$(left_s)" -lt $((reserve_s + 10)) ]; then
      row "$id" "SKIPPED (time: the check's ${deadline_s} s deadline)"
    else
      say "-- ${row_title[$id]}"
      "row_${id//-/_}"
      [ -n "${row_done[$id]:-}" ] || row "$id" "FAIL (the row gave no result)"
    fi
  done
}

# pack: every log into $OUT/logs.tar.gz (replaced whole, so that a call killed at its limit
# still returns the last complete archive).
pack() {
  tar -czf "$OUT/.logs.tar.gz" -C "$work" logs 2>/dev/null && mv -f "$OUT/.logs.tar.gz" "$OUT/logs.tar.gz"
}

# finish: on any exit: rows never reached, the totals, the archive; the exit status.
finish() {
  local id why=${1:-"the check stopped before it"}
  trap - EXIT INT TERM
  cmp_stop
  for id in "${row_ids[@]}"; do
    [ -n "${row_done[$id]:-}" ] || row "$id" "SKIPPED (not reached: $why)"
  done
  {
    echo
    echo "$n_fail failed, $n_inconclusive inconclusive, $n_skipped skipped; total $(($(date +%s) - t0)) s (deadline $deadline_s s)"
  } >>"$summary"
  pack
  cat "$summary"
  rm -rf "$work"
  # (check.log is written by a tee: let it finish before the call returns)
  exec 1>&- 2>&-
  [ -n "${tee_pid:-}" ] && wait "$tee_pid" 2>/dev/null
  [ "$n_fail" = 0 ]
}

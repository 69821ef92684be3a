#!/usr/bin/env bash
# LoRA and QLoRA against a full fine-tune, and against PEFT: a SmolLM2-360M-shaped Llama (the
# smollm2-360m preset, random weights), micro-batch 4 of 1024 tokens on the CPU, bf16-mixed with
# every layer checkpointed, AdamW without clipping (bench/peft/smollm2-360m.yaml). One row each:
#   full     frugal, full fine-tune, with the memory options of bench/frontier's best row that
#            apply on a CPU: the chunked loss (model.loss_chunk_tokens 256), the optimizer step
#            in backward (optim.in_backward) and 8-bit AdamW states (optim.type adamw8bit).
#            Activation offload is left out: on a CPU its host pool is the same memory;
#   lora     frugal, LoRA rank 16, alpha 32, all-linear (the base frozen, fp32 as in the full
#            row), with the chunked loss and the step in backward (fp32 AdamW, as PEFT's row);
#   qlora    frugal, the same with model.quantize_base nf4 on the LoRA targets NF4 can hold
#            (a weight of a multiple of 16384 values; the others stay fp32: listed under the
#            table);
#   peft     PEFT + transformers in Python, the same LoRA (bench/peft/python_step.py lora);
#   torchao  torchao's NF4 on the same layers + PEFT's LoRA in Python (python_step.py qlora).
# The Python rows use torch.autocast("cpu", bfloat16), transformers' non-reentrant activation
# checkpointing of every decoder layer, torch's fused AdamW, the whole logits and the same
# seeded random tokens in each; frugal's rows use its synthetic tokens of the same shape.
#
# What is measured, the same way on every row (as bench/llama):
# - step time: forward, loss, backward, the loss read back, AdamW, zeroing the gradients
#   (frugal: the engine's step_time_s in metrics.jsonl; Python: perf_counter around the same
#   work); the median over the steps after the first (warm-up) of a run, then the median over
#   rounds;
# - peak: the most tensor bytes live during a step, by frugal's tracking CPU allocator, which the
#   Python process loads from libfrugal.so and installs before it builds the model; baseline:
#   the bytes live before the step (weights, adapters, optimizer states); activations: peak
#   minus baseline;
# - peak RSS: the process's VmHWM after its last step (context, not the comparison: it also
#   counts the libraries, the interpreter and memory kept after a free).
#
#   bash bench/peft/run.sh [THREADS]
#   FRUGAL_BENCH_ROUNDS=3 FRUGAL_BENCH_STEPS=4 bash bench/peft/run.sh 2
#   FRUGAL_BENCH_CASES="lora peft" bash bench/peft/run.sh
#   FRUGAL_BENCH_LAYERS=2 FRUGAL_BENCH_SEQ=128 bash bench/peft/run.sh 2   # a smoke run, small
#   FRUGAL_BENCH_MEMORY="" ...        # frugal's rows without the chunked loss / step in backward
#   FRUGAL_BENCH_FULL_SETS="" ...     # the full row with fp32 AdamW states
# FRUGAL_BENCH_MEMORY and FRUGAL_BENCH_FULL_SETS are space-separated key=value settings.
# Only the CLI (and libfrugal.so) is needed: build that target unless told otherwise.
export FRUGAL_BUILD_TARGET=${FRUGAL_BUILD_TARGET:-frugal_cli}
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
py=.venv/bin/python
cfg=bench/peft/smollm2-360m.yaml
cases=${FRUGAL_BENCH_CASES:-"full lora qlora peft torchao"}
rounds=${FRUGAL_BENCH_ROUNDS:-2}
steps=${FRUGAL_BENCH_STEPS:-4}
sets() { for kv in "$@"; do printf -- '--set\n%s\n' "$kv"; done; }
mapfile -t common < <(sets run.dir="$tmp" run.threads="$threads" train.max_steps="$steps" \
  ${FRUGAL_BENCH_LAYERS:+model.n_layer=$FRUGAL_BENCH_LAYERS} \
  ${FRUGAL_BENCH_SEQ:+data.seq_len=$FRUGAL_BENCH_SEQ})
# shellcheck disable=SC2086  # word splitting of the key=value lists is meant
mapfile -t memory < <(sets ${FRUGAL_BENCH_MEMORY-model.loss_chunk_tokens=256 optim.in_backward=true})
# shellcheck disable=SC2086
mapfile -t full_sets < <(sets ${FRUGAL_BENCH_FULL_SETS-optim.type=adamw8bit})
mapfile -t lora < <(sets model.lora.rank=16 model.lora.alpha=32 'model.lora.targets=[all-linear]')

# The LoRA targets NF4 can hold: each kind of projection whose weight has a multiple of
# 64 x 256 = 16384 values (frugal's and torchao's NF4 both require it). Prints the list for
# quantize_base.modules, then one line describing every shape.
build/bin/frugal config show "$cfg" "${common[@]}" >"$tmp/base.yaml"
{ read -r nf4; read -r shapes; } < <($py - "$tmp/base.yaml" <<'PY'
import sys, yaml
m = yaml.safe_load(open(sys.argv[1]))["model"]
C, H, KV, I = m["n_embd"], m["n_head"], m["n_kv_head"], m["intermediate_size"]
hd = C // H
shape = {"q_proj": (H * hd, C), "k_proj": (KV * hd, C), "v_proj": (KV * hd, C), "o_proj": (C, H * hd),
         "gate_proj": (I, C), "up_proj": (I, C), "down_proj": (C, I)}
ok = [n for n, (o, i) in shape.items() if o * i % 16384 == 0]
print(",".join(ok))
print("; ".join(f"{n} {o}x{i} = {o * i / 16384:g} x 16384: {'NF4' if n in ok else 'fp32'}"
                for n, (o, i) in shape.items()))
PY
)
[ -n "$nf4" ] || { echo "peft: no LoRA target of this shape fits NF4 ($shapes)" >&2; exit 1; }
mapfile -t qlora < <(sets model.quantize_base.type=nf4 "model.quantize_base.modules=[$nf4]")

# args_of CASE: the --set list of a row (the Python rows read theirs from the resolved config).
args_of() {
  case $1 in
    full) printf '%s\n' "${common[@]}" "${memory[@]}" "${full_sets[@]}" ;;
    lora | peft) printf '%s\n' "${common[@]}" "${memory[@]}" "${lora[@]}" ;;
    qlora | torchao) printf '%s\n' "${common[@]}" "${memory[@]}" "${lora[@]}" "${qlora[@]}" ;;
    *) echo "peft: unknown case '$1' (full lora qlora peft torchao)" >&2; exit 1 ;;
  esac
}

# run_case CASE ROUND: one line "trainable t peak base rss t peak base rss ..." (the steps after
# the first).
run_case() {
  local name=$1-$2 args
  mapfile -t args < <(args_of "$1")
  case $1 in
    full | lora | qlora)
      build/bin/frugal train "$cfg" "${args[@]}" --set run.name="$name" >"$tmp/$name.log" 2>&1 ||
        { cat "$tmp/$name.log" >&2; exit 1; }
      $py - "$tmp/$name" <<'PY' || exit 1
import json, re, sys
d = sys.argv[1]
log = open(d + "/train.log").read()  # "model llama: N M parameters on cpu[, N M trainable (..%)]"
count = re.search(r"([0-9.]+)M trainable", log) or re.search(r"([0-9.]+)M parameters on", log)
trainable = float(count.group(1)) * 1e6
rows = [json.loads(l) for l in open(d + "/metrics.jsonl") if '"loss"' in l][1:]
print(trainable, *(v for r in rows for v in (r["step_time_s"], r["mem_allocated_peak_bytes"],
                                              r["mem_allocated_bytes"], r["host_rss_peak_bytes"])))
PY
      rm -rf "${tmp:?}/$name" ;;
    peft | torchao)
      build/bin/frugal config show "$cfg" "${args[@]}" >"$tmp/$1.yaml"
      $py bench/peft/python_step.py "$tmp/$1.yaml" "$([ "$1" = peft ] && echo lora || echo qlora)" \
        "$threads" build/lib/libfrugal.so >"$tmp/$1.json" || exit 1
      $py - "$tmp/$1.json" <<'PY' || exit 1
import json, sys
j = json.load(open(sys.argv[1]))
rows = list(zip(j["step_s"], j["peak_bytes"], j["baseline_bytes"], j["rss_peak_bytes"]))[1:]
print(j["trainable"], *(v for r in rows for v in r))
PY
      ;;
  esac
}

# The rows alternate within each round: this machine's speed drifts by several percent over
# minutes, and alternation shares the drift between them.
for c in $cases; do args_of "$c" >/dev/null; : >"$tmp/$c.rounds"; done
for round in $(seq "$rounds"); do
  for c in $cases; do
    line=$(run_case "$c" "$round") || exit 1
    echo "$line" >>"$tmp/$c.rounds"
  done
done

# shellcheck disable=SC2086  # one argument per case
$py - "$tmp" $cases <<'PY'
import statistics, sys
tmp, cases = sys.argv[1], sys.argv[2:]
label = {"full": "frugal full fine-tune", "lora": "frugal LoRA", "qlora": "frugal QLoRA",
         "peft": "PEFT + transformers (LoRA)", "torchao": "torchao NF4 + PEFT (QLoRA)"}
M = 1048576
res = {}
for c in cases:
    rounds = []
    for line in open(f"{tmp}/{c}.rounds"):
        v = list(map(float, line.split()))
        rounds.append((v[0], [v[i:i + 4] for i in range(1, len(v), 4)]))
    steps = [s for _, r in rounds for s in r]
    res[c] = {"trainable": rounds[0][0],
              "t_rounds": [statistics.median(s[0] for s in r) for _, r in rounds],
              "peak": max(s[1] for s in steps), "base": min(s[2] for s in steps),
              "rss": max(s[3] for s in steps)}
    res[c]["t"] = statistics.median(res[c]["t_rounds"])
print("| row | trainable | step (s) | peak (MiB) | baseline (MiB) | activations (MiB) | peak RSS (MiB) |")
print("|---|---|---|---|---|---|---|")
for c in cases:
    r = res[c]
    print(f"| {label[c]} | {r['trainable'] / 1e6:.2f}M | {r['t']:.2f} | {r['peak'] / M:.1f} | "
          f"{r['base'] / M:.1f} | {(r['peak'] - r['base']) / M:.1f} | {r['rss'] / M:.0f} |")
ratios = [("frugal LoRA / frugal full fine-tune, peak", "lora", "full", "peak", 0.6),
          ("frugal QLoRA / frugal full fine-tune, peak", "qlora", "full", "peak", 0.4),
          ("frugal LoRA / PEFT, peak", "lora", "peft", "peak", 0.9),
          ("frugal LoRA / PEFT, step time", "lora", "peft", "t", 1.0),
          ("frugal QLoRA / torchao + PEFT, peak", "qlora", "torchao", "peak", 0.9),
          ("frugal QLoRA / torchao + PEFT, step time", "qlora", "torchao", "t", 1.0)]
rows = [x for x in ratios if x[1] in res and x[2] in res]
if rows:
    print()
    print("| ratio | value (range over rounds) | target | met |")
    print("|---|---|---|---|")
for name, a, b, key, target in rows:
    v = res[a][key] / res[b][key]
    spread = ""
    if key == "t":
        per = [x / y for x, y in zip(res[a]["t_rounds"], res[b]["t_rounds"])]
        spread = f" ({min(per):.2f}-{max(per):.2f})"
    print(f"| {name} | {v:.2f}x{spread} | <= {target} | {'yes' if v <= target else 'no'} |")
PY
echo
bt=$($py -c 'import sys, yaml; c = yaml.safe_load(open(sys.argv[1])); m, d = c["model"], c["data"]; print("%d layers, B %d, T %d" % (m["n_layer"], d["micro_batch_size"], d["seq_len"]))' "$tmp/base.yaml")
echo "threads: $threads; $bt; $steps steps per run (the first is warm-up), $rounds alternating rounds;" \
  "$(nproc) cores, $(uname -m); torch $($py -c 'import torch; print(torch.__version__)')," \
  "transformers $($py -c 'import transformers; print(transformers.__version__)')," \
  "peft $($py -c 'import peft; print(peft.__version__)'), torchao $($py -c 'import torchao; print(torchao.__version__)')"
none() { printf '%s' "${1:-(nothing)}"; }
echo "every frugal row: $(none "${FRUGAL_BENCH_MEMORY-model.loss_chunk_tokens=256 optim.in_backward=true}");" \
  "the full fine-tune also: $(none "${FRUGAL_BENCH_FULL_SETS-optim.type=adamw8bit}"); LoRA: rank 16, alpha 32, all-linear"
echo "QLoRA's NF4 base (frugal and torchao): $shapes"

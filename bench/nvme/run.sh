#!/usr/bin/env bash
# NVMe offload against RAM offload: GPT-2 124M on the CPU with its fp32 masters and AdamW
# moments in host memory (offload.optimizer true) or in a scratch file on disk (nvme), in the
# same run; and the disk's own direct-I/O bandwidth measured by `frugal doctor --disk` in that
# run too. Prints a markdown table (docs/benchmarks.md).
#   bash bench/nvme/run.sh [THREADS]        FRUGAL_NVME_DIR=/mnt/nvme to put the state there
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
dir=${FRUGAL_NVME_DIR:-$tmp/nvme}
mkdir -p "$dir"
rounds=${FRUGAL_BENCH_ROUNDS:-2}
cfg=bench/nvme/gpt2-124m.yaml

# median KEY FILE: the median of KEY over the logged steps after the first two.
median_of() {
  .venv/bin/python - "$1" "$2" <<'PY'
import json, statistics, sys
key, path = sys.argv[1], sys.argv[2]
v = [json.loads(l)[key] for l in open(path) if '"loss"' in l]
print(statistics.median(v[2:]))
PY
}

# The disk first: 1 GiB written and read back with O_DIRECT (GiB/s).
build/bin/frugal doctor --disk "$dir" --disk-mib 1024 --json >"$tmp/doctor.json"
read -r disk_how disk_write disk_read < <(.venv/bin/python - "$tmp/doctor.json" <<'PY'
import json, sys
f = {x["name"].split()[-1]: x["value"] for x in json.load(open(sys.argv[1]))["findings"] if x["name"].startswith("disk ")}
print(f["I/O"].replace(" ", "").replace(",", "+"), f["write"].split()[0], f["read"].split()[0])
PY
)

median() { .venv/bin/python -c 'import statistics,sys; print(statistics.median(map(float, sys.argv[1:])))' "$@"; }

# Two cases: one micro-batch per step (the optimizer's share of a step at its largest), and 8
# accumulated micro-batches per step (closer to how a model is trained: GPT-2's own steps were
# 0.5M tokens).
printf '| case | RAM offload: step (s) | optimizer phase (s) | NVMe offload: step (s) | optimizer phase (s) | step / RAM offload | target | read + write per step (GiB) | achieved in the optimizer phase (GiB/s) | achieved / disk | target |\n|---|---|---|---|---|---|---|---|---|---|---|\n'
for acc in 1 8; do
  ram=() nvme=() ram_opt=() nvme_opt=()
  for round in $(seq "$rounds"); do
    for where in ram nvme; do
      set_where=(--set strategy.offload.optimizer=true)
      [ "$where" = nvme ] && set_where=(--set strategy.offload.optimizer=nvme --set strategy.offload.nvme_path="$dir")
      name=$where-$acc-$round
      build/bin/frugal train "$cfg" --set run.dir="$tmp" --set run.name="$name" --set strategy.accumulation="$acc" \
        --set run.threads="$threads" "${set_where[@]}" >"$tmp/$name.log" 2>&1
      step=$(median_of step_time_s "$tmp/$name/metrics.jsonl")
      opt=$(median_of time_optimizer_s "$tmp/$name/metrics.jsonl")
      if [ "$where" = ram ]; then ram+=("$step") ram_opt+=("$opt"); else nvme+=("$step") nvme_opt+=("$opt"); fi
    done
  done
  state_mib=$(grep -o '[0-9.]* MiB of masters and optimizer state' "$tmp/nvme-$acc-1.log" | head -1 | cut -d' ' -f1)
  line=$(grep -o 'offload.optimizer nvme: .*' "$tmp/nvme-$acc-1.log" | head -1)
  r=$(median "${ram[@]}") n=$(median "${nvme[@]}") ro=$(median "${ram_opt[@]}") no=$(median "${nvme_opt[@]}")
  awk -v acc="$acc" -v r="$r" -v ro="$ro" -v n="$n" -v no="$no" -v s="$state_mib" -v w="$disk_write" -v rd="$disk_read" 'BEGIN {
    moved = 2 * s / 1024; seq = 2 * w * rd / (w + rd);
    printf "| GPT-2 124M, micro-batch 2 x 128, accumulation %d | %.3f | %.3f | %.3f | %.3f | %.2fx | <= 1.3x | %.2f | %.2f | %.0f%% | >= 80%% |\n",
      acc, r, ro, n, no, n / r, moved, moved / no, 100 * moved / no / seq }'
done
echo
awk -v w="$disk_write" -v rd="$disk_read" 'BEGIN { printf "disk (frugal doctor --disk, 1 GiB, O_DIRECT): write %.2f GiB/s, read %.2f GiB/s; reading then writing the same bytes: %.2f GiB/s (the reference of achieved / disk)\n", w, rd, 2 * w * rd / (w + rd) }'
echo "$line"
echo "disk: $disk_how at $dir; threads: $threads; rounds: $rounds; machine: $(nproc) cores, $(uname -m); torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')"

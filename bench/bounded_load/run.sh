#!/usr/bin/env bash
# Bounded loading at scale: a random Llama of SmolLM2-360M's shape (362M parameters, tied
# embeddings of 49152 x 960) trained one step at world 2 under zero3 writes a sharded
# checkpoint; then, each in a fresh job of 2 ranks, it is resumed under zero3 (each rank its
# own shard) and under hsdp (read by parameter name), exported as a Hugging Face folder, and
# that folder loaded as model.init_from under zero3 and under hsdp. For each load the
# trainer's "loading:" line gives, on the rank where it was highest, the host tensors' peak
# against what the rank keeps and the resident memory above the run's start; the
# export's peak resident memory is measured against `frugal --version`'s. Prints a markdown
# table (docs/reliability.md).
#   bash bench/bounded_load/run.sh [THREADS]      (about 6 GiB of disk, 12 GiB of memory)
source "$(dirname "${BASH_SOURCE[0]}")/../setup.sh"
frugal=build/bin/frugal
cfg=$tmp/medium.yaml
cat >"$cfg" <<YAML
run: {dir: '$tmp/runs', seed: 1, threads: $threads}
model: {type: llama, size: smollm2-360m, block_size: 64}
data: {type: synthetic, micro_batch_size: 1, synthetic_samples: 64, num_workers: 0}
optim: {type: adamw, lr: 0.0001}
train: {max_steps: 1, eval_batches: 0, progress: none, checkpoint_every: 0, save_final: true}
strategy: {sharding: zero3}
generate: {tokens: 0}
YAML
# launch LOG ARGS...: a 2-rank training job; its log's end on stderr when it fails.
launch() {
  local log=$1
  shift
  "$frugal" launch --nproc-per-node 2 train "$cfg" "$@" >"$log" 2>&1 || { tail -5 "$log" >&2; exit 1; }
}

launch "$tmp/saved.log" --set run.name=saved
ckpt=$tmp/runs/saved/checkpoints/step_00000001
params=$(grep -o 'model llama: [0-9.]*M parameters' "$tmp/saved.log" | head -1 | grep -o '[0-9.]*M')
# The largest tensor (the token embedding): what "plus one tensor" allows.
largest=$((49152 * 960 * 4))

# row CASE LOG: the "loading:" line's figures, the tensors' peak and the resident memory
# each against 1.1 x kept + one tensor.
row() {
  .venv/bin/python - "$1" "$2" "$largest" <<'PY'
import re, sys
case, log, largest = sys.argv[1], sys.argv[2], int(sys.argv[3])
units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
line = next(l for l in open(log) if "loading: host tensors" in l)
m = re.search(r"peaked at ([0-9.]+)x what a rank keeps \(([0-9.]+) (\w+) kept\); resident memory at most ([0-9.]+) (\w+)", line)
ratio, kept, rss = float(m[1]), float(m[2]) * units[m[3]], float(m[4]) * units[m[5]]
peak = ratio * kept
bound = 1.1 * kept + largest
print(f"| {case} | {kept / 2**30:.2f} | {peak / 2**30:.2f} ({ratio:.2f}x) | {rss / 2**30:.2f} | {bound / 2**30:.2f} | {'yes' if max(peak, rss) <= bound else 'no'} |")
PY
}

printf '| load (world 2, %s parameters) | a rank keeps (GiB) | host tensors peak (GiB) | resident above start (GiB) | 1.1 x kept + largest tensor (GiB) | within |\n|---|---|---|---|---|---|\n' "$params"
launch "$tmp/zero3.log" --set run.name=zero3 --set run.resume="$ckpt" --set train.save_final=false
row "checkpoint, resumed under zero3 (own shard)" "$tmp/zero3.log"
launch "$tmp/hsdp.log" --set run.name=hsdp --set run.resume="$ckpt" --set train.save_final=false \
  --set strategy.sharding.mode=hsdp --set strategy.sharding.shard_size=2
row "checkpoint, resumed under hsdp (by parameter name)" "$tmp/hsdp.log"

# The export, streamed: its peak resident memory against a process that loads nothing.
base_kib=$(/usr/bin/time -f %M "$frugal" --version 2>&1 >/dev/null | tail -1)
/usr/bin/time -o "$tmp/export.kib" -f %M "$frugal" export "$ckpt" --format hf --output "$tmp/hf" \
  >"$tmp/export.log" 2>&1 || { tail -5 "$tmp/export.log" >&2; exit 1; }
export_kib=$(tail -1 "$tmp/export.kib")
# The folder's config.json gives the sizes: the same run without the size preset.
sed "s|model: .*|model: {type: llama, init_from: '$tmp/hf'}|" "$cfg" >"$tmp/init.yaml"
cfg=$tmp/init.yaml launch "$tmp/init.log" --set run.name=init --set train.save_final=false
row "model.init_from (HF folder), under zero3" "$tmp/init.log"
cfg=$tmp/init.yaml launch "$tmp/init-hsdp.log" --set run.name=init-hsdp --set train.save_final=false \
  --set strategy.sharding.mode=hsdp --set strategy.sharding.shard_size=2
row "model.init_from (HF folder), under hsdp" "$tmp/init-hsdp.log"
model_bytes=$(du -b "$tmp/hf/"*.safetensors | awk '{s += $1} END {print s}')
awk -v b="$base_kib" -v e="$export_kib" -v m="$model_bytes" -v l="$largest" 'BEGIN {
  printf "\n| export --format hf | model (GiB) | largest tensor (GiB) | peak resident (GiB) | above frugal --version (GiB) |\n|---|---|---|---|---|\n"
  printf "| SmolLM2-360M shape | %.2f | %.2f | %.2f | %.2f |\n", m / 2^30, l / 2^30, e / 2^20, (e - b) / 2^20 }'
echo

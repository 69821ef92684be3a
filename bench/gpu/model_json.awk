# `frugal config show` (YAML) -> the GPT's sizes as one line of JSON, for the Python side of the
# GPU benchmark and check (the GPU machine's python3 has torch but no YAML parser).
#   frugal config show CFG | awk -f bench/gpu/model_json.awk
/^model:/ { m = 1; next }
/^[a-z]/ { m = 0 }
m && $1 ~ /^(vocab_size|block_size|n_layer|n_head|n_embd|dropout|bias):$/ {
  v[substr($1, 1, length($1) - 1)] = $2
}
END {
  printf "{\"vocab_size\": %s, \"block_size\": %s, \"n_layer\": %s, \"n_head\": %s, \"n_embd\": %s, \"dropout\": %s, \"bias\": %s}",
    v["vocab_size"], v["block_size"], v["n_layer"], v["n_head"], v["n_embd"], v["dropout"], v["bias"]
}

#!/usr/bin/env bash
# calibrate_family.sh SHARDTRAIN PROFILE: `simulate calibrate` measures any family (its profile
# records the family and its own keys), and a cluster naming one profile per family predicts a
# config from its own family's profile: llama-tiny from the Llama calibration (measured), tiny
# from GPT-2's; a Qwen3 config, with no profile of its own, is scaled from the first. Links are
# copied from PROFILE (the bundled one) to keep this quick.
set -u
st=$1 links=$2
dir=$(mktemp -d /tmp/shardtrain-calfamily-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
quick=(--ranks 1 --rows 1 --steps 1 --links-from "$links")
"$st" simulate calibrate --config tiny "${quick[@]}" --out "$dir/gpt2.json" > "$dir/log" 2>&1 ||
  { cat "$dir/log"; fail "calibrating tiny"; }
"$st" simulate calibrate --config llama-tiny "${quick[@]}" --out "$dir/llama.json" > "$dir/log" 2>&1 ||
  { cat "$dir/log"; fail "calibrating llama-tiny"; }
python3 - "$dir/llama.json" << 'PY' || fail "the Llama profile does not record its family and keys"
import json, sys
m = json.load(open(sys.argv[1]))["model"]
assert m["family"] == "llama" and m["own"]["model.n_kv_head"] == 2 and m["own"]["model.ffn_hidden"] == 768, m
PY
# One rank with every core, as calibrate measured it.
threads=$(nproc)
cat > "$dir/cluster.toml" << TOML
nodes = 1
ranks_per_node = 1
threads_per_rank = $threads
[compute]
profile = "gpt2.json, llama.json"
[intra_node]
link = "shm"
TOML
predict() {  # config overrides...: the compute line
  "$st" simulate --cluster "$dir/cluster.toml" --mesh fsdp training.global_batch=1 --config "$@" |
    sed -n 's/^compute: //p'
}
got=$(predict llama-tiny) || fail "simulate llama-tiny"
[[ $got == "measured (llama profile, 1 rows, $threads threads)" ]] || fail "llama-tiny: $got"
got=$(predict tiny) || fail "simulate tiny"
[[ $got == "measured (gpt2 profile, 1 rows, $threads threads)" ]] || fail "tiny: $got"
got=$(predict llama-tiny model.family=qwen3 model.head_dim=64) || fail "simulate qwen3"
[[ $got == "scaled from the gpt2 profile's 1 rows x $threads threads"* ]] || fail "qwen3: $got"
echo "ok"

#!/usr/bin/env bash
# launcher_quiet.sh SHARDRUN SHARDTRAIN: a 2-rank job that fails shows the user its one line on
# stderr and nothing of mpirun's boilerplate after it (the "Primary job terminated normally"
# and "exited with non-zero status" blocks once followed every failure), with and without
# --max-restarts (which keeps mpirun's output for its decision).
set -u
shardrun=$1 st=$2
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
job=(train model.n_layer=1 model.n_embd=32 model.n_head=2 model.block_size=16
     training.seq_len=16 training.max_steps=6 optimizer.lr=1e30 optimizer.warmup_steps=0)
want='shardtrain: rank 0: failed: step 2: the global gradient norm is not finite (nan)'
err=$("$shardrun" -n 2 "$st" "${job[@]}" 2>&1 > /dev/null)
[ "$err" = "$want" ] || fail "want stderr to be one line: $want; got: $err"
err=$("$shardrun" -n 2 --max-restarts 1 --restart-backoff 0.1 "$st" "${job[@]}" 2>&1 > /dev/null)
printf '%s\n' "$err" | grep -qE -- '^-{40,}$|terminated normally|non-zero status' &&
  fail "mpirun's boilerplate under --max-restarts: $err"
[ "$(printf '%s\n' "$err" | grep -c "^$want$")" = 2 ] || fail "want the line once per run: $err"
echo "one line per failed run, none of mpirun's"

#!/usr/bin/env bash
# bf16_matmul_key.sh SHARDTRAIN: precision.bf16_matmul on this CPU. `widened` trains everywhere
# and says so; `native` trains where oneDNN has a BF16 matmul (AVX512-core) and is refused
# elsewhere with exit 2 and one message naming the missing instruction set; `auto` names the
# path it took. The losses of widened and native (where both run) agree. On tiny: the key's
# behaviour does not depend on the model (the default config's runs took 45 s of CPU).
set -u
st=$1
fail() { printf 'bf16_matmul_key: %s\n' "$*"; exit 1; }
loss() { printf '%s\n' "$1" | grep -Eo 'step +3/3 \| loss [0-9.]+' | grep -Eo '[0-9.]+$'; }

out=$("$st" train --config tiny training.max_steps=3 precision.bf16_matmul=widened 2>&1) || fail "widened failed: $out"
printf '%s' "$out" | grep -q 'bf16 matmul: widened to fp32 (precision.bf16_matmul=widened)' ||
  fail "widened run does not name its path: $out"
printf '%s' "$out" | grep -q 'matmul peak (fp32 matmul, which bf16 is widened to' ||
  fail "widened run's MFU denominator is not the fp32 peak: $out"
widened=$(loss "$out")
[ -n "$widened" ] || fail "no step 3 loss: $out"

auto=$("$st" train --config tiny training.max_steps=1 2>&1) || fail "auto failed: $auto"
if grep -q 'avx512f' /proc/cpuinfo && grep -q 'avx512bw' /proc/cpuinfo; then
  printf '%s' "$auto" | grep -Eq 'bf16 matmul: (native|widened)' || fail "auto path unnamed: $auto"
  out=$("$st" train --config tiny training.max_steps=3 precision.bf16_matmul=native 2>&1) || fail "native failed: $out"
  printf '%s' "$out" | grep -q 'bf16 matmul: native' || fail "native run does not say so: $out"
  native=$(loss "$out")
  awk -v a="$widened" -v b="$native" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 * a) }' ||
    fail "step-3 loss widened $widened vs native $native differ by more than 1%"
else
  printf '%s' "$auto" | grep -q 'bf16 matmul: widened to fp32 (no AVX512-BF16 on this CPU)' ||
    fail "auto on a CPU without AVX-512 should widen and say why: $auto"
  out=$("$st" train --config tiny training.max_steps=1 precision.bf16_matmul=native 2>&1)
  code=$?
  [ "$code" = 2 ] || fail "native on a CPU without AVX512-core exited $code, not 2: $out"
  [ "$(printf '%s\n' "$out" | grep -c 'precision.bf16_matmul = native: this CPU has no native BF16 matmul')" = 1 ] ||
    fail "native refusal is not one message naming the key: $out"
  printf '%s' "$out" | grep -q 'step ' && fail "native refusal trained anyway: $out"
fi
echo "bf16_matmul_key: ok (widened step-3 loss $widened)"

#!/usr/bin/env bash
# training_loop.sh CASE SHARDRUN SHARDTRAIN: what the loop does every so many steps, in short
# FP32 runs of a one-block tiny.
#   log_every   metrics.log_every = 3 over 7 steps prints steps 3, 6 and 7 (text and --json);
#               metrics.file keeps all 7.
#   validation  training.eval_every = 3 over 6 steps: records after steps 3 and 6, each on its
#               step line; the one after step 6 is the final validation (the same windows,
#               recorded once), equal to a run's without periodic ones; the training losses
#               equal that run's, bitwise;
#               training.eval_tokens = 65 scores 3 windows of 32 (96 tokens).
#   ranks       the same validations at 2 ranks, FSDP and DDP, within 1e-5 of 1 rank's.
#   resume      optimizer.schedule = wsd (sqrt decay over half the steps) resumed after step 3 at
#               2 ranks: steps 4-6 take the uninterrupted run's learning rates exactly.
set -u
case_=$1 shardrun=$2 st=$3
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
train=(train --config tiny model.n_layer=1 training.seq_len=32 training.max_steps=6
       precision.param_dtype=fp32)
fail() { printf 'FAIL %s: %s\n' "$case_" "$*"; exit 1; }
run() {  # run NAME ARGS...: ARGS' output in NAME.out, exit 0 required
  local name=$1
  shift
  "$@" > "$name.out" 2>&1
  local rc=$?
  [ $rc = 0 ] || { cat "$name.out"; fail "$name: exit $rc"; }
}
# after_step<TAB>val_loss of each validation record (the final one last), and step<TAB>loss
# and step<TAB>lr of each step record.
vals() { sed -n -E 's/^\{"after_step":([0-9]+),"val_loss":([-0-9.e+]+).*/\1\t\2/p' "$1"; }
losses() { grep '"loss":' "$1" | sed -E 's/.*"loss":([-0-9.e+]+).*"step":([0-9]+).*/\2\t\1/'; }
lrs() { grep '"loss":' "$1" | sed -E 's/.*"lr":([-0-9.e+]+).*"step":([0-9]+).*/\2\t\1/'; }
# close A B: the two columns of tab-separated files A and B agree key by key within 1e-5.
close() {
  join <(sort "$1") <(sort "$2") | awk -v n="$(wc -l < "$1")" '
    { d = $2 - $3; if (d < 0) d = -d; if (d > 1e-5 * ($2 < 0 ? -$2 : $2)) { print; bad = 1 } ++k }
    END { exit bad || k != n || n == 0 }'
}

case $case_ in
  log_every)
    run text "$st" "${train[@]}" training.max_steps=7 metrics.log_every=3 metrics.file=m.jsonl
    printed=$(sed -n -E 's/^step +([0-9]+)\/7 .*/\1/p' text.out | tr '\n' ' ')
    [ "$printed" = "3 6 7 " ] || fail "step lines printed for steps '$printed', want '3 6 7 '"
    [ "$(losses m.jsonl | wc -l)" = 7 ] || fail "metrics.file holds $(losses m.jsonl | wc -l) steps"
    "$st" "${train[@]}" training.max_steps=7 metrics.log_every=3 --json > json.out 2> /dev/null \
      || fail "--json run: exit $?"
    printed=$(losses json.out | cut -f1 | tr '\n' ' ')
    [ "$printed" = "2 5 6 " ] || fail "--json printed steps '$printed' (0-based), want '2 5 6 '"
    echo "log_every: printed 3 6 7 of 7 steps, metrics.file kept all"
    ;;
  validation)
    run every3 "$st" "${train[@]}" training.eval_every=3 metrics.file=a.jsonl
    run none "$st" "${train[@]}" metrics.file=b.jsonl
    vals a.jsonl > a.tsv
    # The validation after the last step, over the final one's windows, is the final one:
    # recorded once, and equal to the final validation of the run without periodic ones.
    [ "$(cut -f1 a.tsv | tr '\n' ' ')" = "3 6 " ] ||
      fail "validation records after steps '$(cut -f1 a.tsv | tr '\n' ' ')', want 3 and 6 (the final)"
    grep -q '"val_tokens":2048}' a.jsonl || fail "a periodic record scores other than 64 x 32 tokens"
    [ "$(sed -n 2p a.tsv | cut -f2)" = "$(vals b.jsonl | cut -f2)" ] ||
      fail "the validation after step 6 ($(sed -n 2p a.tsv)) is not the final one ($(vals b.jsonl))"
    grep -q "^validation loss: $(awk 'NR == 2 { printf "%.4f", $2 }' a.tsv)\$" every3.out ||
      fail "the final validation line differs from step 6's: $(grep '^validation' every3.out)"
    for n in 3 6; do
      v=$(awk -v n="$n" '$1 == n { printf "%.4f", $2; exit }' a.tsv)
      grep -Eq "^step +$n/6 \| loss .* \| val $v\$" every3.out || fail "step $n's line lacks '| val $v'"
    done
    [ "$(grep -c '| val ' every3.out)" = 2 ] || fail "a step line without a validation shows one"
    diff <(losses a.jsonl) <(losses b.jsonl) > /dev/null ||
      fail "validating changed the training losses: $(diff <(losses a.jsonl) <(losses b.jsonl))"
    run tokens "$st" "${train[@]}" training.eval_every=2 training.eval_tokens=65 metrics.file=c.jsonl
    [ "$(grep -c '"val_tokens":96}' c.jsonl)" = 3 ] ||
      fail "eval_tokens = 65 should score 3 windows of 32 after steps 2, 4 and 6: $(grep val_ c.jsonl)"
    echo "validation: after steps 3 and 6, the last equal to the final one; losses unchanged"
    ;;
  ranks)
    run one "$st" "${train[@]}" training.eval_every=3 metrics.file=one.jsonl
    run fsdp "$shardrun" -n 2 "$st" "${train[@]}" training.eval_every=3 metrics.file=fsdp.jsonl
    run ddp "$shardrun" -n 2 "$st" "${train[@]}" training.eval_every=3 \
      sharding.replicate_degree=2 metrics.file=ddp.jsonl
    vals one.jsonl | head -2 > one.tsv
    for mesh in fsdp ddp; do
      vals $mesh.jsonl | head -2 > $mesh.tsv
      close one.tsv $mesh.tsv || fail "$mesh's validations differ from 1 rank's: $(paste one.tsv $mesh.tsv)"
      grep -Eq "^step +3/6 \| .* \| val [0-9.]+$" $mesh.out || fail "$mesh: step 3's line lacks its validation"
    done
    echo "ranks: 2-rank FSDP and DDP validations within 1e-5 of 1 rank's"
    ;;
  resume)
    wsd=(optimizer.schedule=wsd optimizer.decay_fraction=0.5 optimizer.decay_shape=sqrt
         optimizer.warmup_steps=1)
    run whole "$st" "${train[@]}" "${wsd[@]}" checkpoint.dir=ck checkpoint.every=3 metrics.file=a.jsonl
    run resumed "$shardrun" -n 2 "$st" "${train[@]}" "${wsd[@]}" checkpoint.dir=ck2 \
      checkpoint.resume=ck/step-00000003 metrics.file=b.jsonl
    lrs a.jsonl > a.tsv
    lrs b.jsonl > b.tsv
    [ "$(cut -f1 b.tsv | tr '\n' ' ')" = "3 4 5 " ] || fail "the resumed run trained steps $(cut -f1 b.tsv)"
    # Warm-up to 3e-3 in 1 step, stable to step 2, then min_lr + (lr - min_lr)(1 - sqrt(p)) over
    # the last 3 steps, p = 1/3, 2/3, 1: by hand, 3e-4 + 2.7e-3 x (0.42265, 0.18350, 0).
    printf '0\t0.003\n1\t0.003\n2\t0.003\n3\t0.00144115\n4\t0.00079546\n5\t0.0003\n' > want.tsv
    close want.tsv a.tsv || fail "the schedule's learning rates: $(paste want.tsv a.tsv)"
    join <(sort a.tsv) <(sort b.tsv) | awk '$2 != $3 { bad = 1; print } END { exit bad || NR != 3 }' ||
      fail "the resumed run's learning rates differ"
    losses a.jsonl | tail -3 > a_loss.tsv
    losses b.jsonl > b_loss.tsv
    close a_loss.tsv b_loss.tsv || fail "the resumed losses differ: $(paste a_loss.tsv b_loss.tsv)"
    echo "resume: steps 4-6 at the uninterrupted run's learning rates, losses within 1e-5"
    ;;
  *) fail "unknown case" ;;
esac

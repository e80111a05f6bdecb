#!/usr/bin/env bash
# disk_full.sh SHARDRUN SHARDTRAIN: a checkpoint save and a safetensors export onto a disk
# that fills up (a 1 MiB tmpfs in a private mount namespace) fail with a message naming the
# file and the cause, exit non-zero, and leave no temporary behind; under --max-restarts the
# job is not restarted (a full disk is full again on a restart).
set -u
shardrun=$1 st=$2
if [ "${DISK_FULL_INSIDE:-}" != 1 ]; then
  exec env DISK_FULL_INSIDE=1 unshare -m "$0" "$@"
fi
dir=$(mktemp -d /tmp/shardtrain-full-XXXXXX)
trap 'umount "$dir/disk" 2>/dev/null; rm -rf "$dir"' EXIT
mkdir -p "$dir/disk" && mount -t tmpfs -o size=1m shardtrain-full "$dir/disk" || { echo "cannot mount a tmpfs"; exit 1; }
fail() { printf '%s\n' "$*"; exit 1; }
model=(model.n_layer=2 model.n_embd=64 model.n_head=4 model.block_size=32 training.seq_len=32)
out=$(timeout 30 "$shardrun" -n 2 "$st" train "${model[@]}" training.max_steps=2 \
  "checkpoint.dir=$dir/disk/ckpt" 2>&1)
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "training onto a full disk: exit $rc: $out"
printf '%s' "$out" | grep -Eq "writing '$dir/disk/ckpt/[^']+'.*No space left on device" ||
  fail "the file and the cause are not named: $out"
[ -z "$(ls -A "$dir/disk/ckpt" 2> /dev/null | grep -vx .lock)" ] || fail "left behind: $(ls -la "$dir/disk/ckpt")"
# Under --max-restarts a full disk is not restarted: the rank's failure record says ENOSPC, which
# the next run would meet again (it once used both restarts, its wording differing each time).
out=$(timeout 60 "$shardrun" -n 2 --max-restarts 2 --restart-backoff 0 "$st" train "${model[@]}" \
  training.max_steps=2 "checkpoint.dir=$dir/disk/ckpt" 2>&1)
rc=$?
[ $rc = 1 ] || fail "a full disk under --max-restarts: exit $rc: $out"
printf '%s' "$out" | grep -q "^shardrun: not restarting: No space left on device (free space first) fails again on a restart; the failure, after step 2: rank [01]: failed: .*No space left on device" ||
  fail "want the refusal to restart naming ENOSPC: $out"
! printf '%s' "$out" | grep -q "^restart 1" || fail "restarted after a full disk: $out"
# An export too large for the disk: a checkpoint on a roomy disk, exported onto the full one.
"$shardrun" -n 2 "$st" train "${model[@]}" training.max_steps=1 "checkpoint.dir=$dir/ckpt" \
  > /dev/null 2>&1 || fail "training failed"
dd if=/dev/zero of="$dir/disk/filler" bs=64k count=15 2> /dev/null
out=$(timeout 30 "$shardrun" -n 2 "$st" export --checkpoint "$dir/ckpt/step-00000001" \
  --out "$dir/disk/model.safetensors" --dtype fp32 2>&1)
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "export onto a full disk: exit $rc: $out"
printf '%s' "$out" | grep -Eq "'$dir/disk/[^']*model.safetensors[^']*'.*No space left on device" ||
  fail "the export's file and cause are not named: $out"
ls "$dir/disk" | grep -q "safetensors" && fail "export left behind: $(ls "$dir/disk")"
echo "a full disk fails the save and the export by name and leaves nothing behind"

#!/usr/bin/env bash
# readme_tour.sh SOURCE_DIR BIN_DIR: runs every command block of the README marked
# `<!-- tour -->`, in order, as a reader would (from the source directory), with build/bin/
# meaning BIN_DIR, /tmp/tour a temporary directory, and a tenth of the steps (max_steps,
# checkpoint.every and step-NNNNNNNN divided by 10). Fails naming the first command that fails.
set -u
src=$1 bin=$2
dir=$(mktemp -d /tmp/shardtrain-tour-XXXXXX)
trap 'rm -rf "$dir"' EXIT
blocks=$(awk '
  /^<!-- tour -->$/ { armed = 1; next }
  armed && /^```sh$/ { inside = 1; armed = 0; next }
  inside && /^```$/ { inside = 0; next }
  inside { print }
' "$src/README.md")
[ -n "$blocks" ] || { echo "no <!-- tour --> blocks in $src/README.md"; exit 1; }
tenth() {  # the line with every step count divided by 10 (at least 1)
  perl -pe 's/(max_steps=|checkpoint\.every=)(\d+)/$1 . (int($2 \/ 10) || 1)/ge;
            s/step-(\d{8})/sprintf("step-%08d", int($1 \/ 10) || 1)/ge'
}
cd "$src" || exit 1
n=0
while IFS= read -r line; do
  [ -z "$line" ] && continue
  n=$((n + 1))
  cmd=$(printf '%s\n' "$line" | tenth | sed -e "s#/tmp/tour#$dir#g" -e "s#build/bin/#$bin/#g")
  echo "tour $n: $cmd"
  out=$(bash -c "$cmd" 2>&1)
  rc=$?
  printf '%s\n' "$out" | tail -3
  if [ $rc != 0 ]; then
    printf 'tour command %d exited %d: %s\n%s\n' "$n" "$rc" "$line" "$out" | tail -30
    exit 1
  fi
done <<< "$blocks"
echo "the README's $n tour commands ran"

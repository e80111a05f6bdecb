#!/usr/bin/env bash
# shardrun_help.sh SHARDRUN: `shardrun --help` (and -h) exits 0 and prints shardrun's own usage,
# not mpirun's help: one line for every option the script's argument loop parses (read from the
# script itself, so an option added without help fails here), with its default when it takes a
# value, then where mpirun's options are listed.
set -u
shardrun=$1
dir=$(mktemp -d /tmp/shardrun-help-XXXXXX); trap 'rm -rf "$dir"' EXIT
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }

"$shardrun" --help > "$dir/help" 2> "$dir/err"
rc=$?
[ "$rc" = 0 ] || fail "shardrun --help exited $rc: $(cat "$dir/help" "$dir/err")"
[ ! -s "$dir/err" ] || fail "shardrun --help wrote to stderr: $(cat "$dir/err")"
head -1 "$dir/help" | grep -q '^usage: shardrun ' || fail "no usage line first: $(head -3 "$dir/help")"
grep -qi '^usage: mpirun\|Open MPI)' "$dir/help" && fail "shardrun --help printed mpirun's help"
grep -q "'mpirun --help'" "$dir/help" || fail "the help does not say where mpirun's options are listed"
for call in "-h" "-n 4 --help"; do
  # shellcheck disable=SC2086  # the words of $call are separate arguments
  "$shardrun" $call 2>&1 | cmp -s - "$dir/help" || fail "shardrun $call does not print the same help"
done

# The option labels of the argument loop (`    -n | -np) ... shift 2 ;;`): OPTION VALUE-TAKEN.
awk '/^while \[ \$# -gt 0 \]; do$/ { inside = 1; next }
     inside && /^done$/ { exit }
     inside && /^    -[^)]*\)/ {
       label = $0; sub(/^ +/, "", label); sub(/\).*/, "", label)
       n = split(label, names, / \| /)
       for (i = 1; i <= n; i++) print names[i], ($0 ~ /shift 2/ ? "value" : "flag")
     }' "$shardrun" > "$dir/options"
{ grep -q '^-n value$' "$dir/options" && grep -q '^--fault value$' "$dir/options"; } ||
  fail "could not read the options from $shardrun's argument loop: $(cat "$dir/options")"
while read -r option kind; do
  # An option's line: two spaces, maybe its other spellings ("-n, -np RANKS"), then it.
  line=$(grep -E -e "^  (-[a-z-]+, )*$option( |,|\$)" "$dir/help") ||
    fail "shardrun --help has no line for $option"
  if [ "$kind" = value ]; then
    [[ $line == *default* ]] || fail "shardrun --help does not give $option's default: $line"
  fi
done < "$dir/options"
echo "shardrun --help: $(wc -l < "$dir/options") options, each with its line"

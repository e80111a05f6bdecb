#!/usr/bin/env bash
# library_doc_programs.sh PREFIX SOURCE_DIR SHARDRUN: every ```cpp block of docs/library.md is a
# whole program; each is compiled against the library installed in PREFIX (pkg-config) and run at
# 1, 2 and 4 ranks, and must end with exit 0 (MPI ended by the RankContext, nothing else called).
# Then two programs whose exception escapes main on one rank or on every rank: the job ends
# with that rank's message and exit 2 (an InputError) or 1 (anything else), never a hang or a
# crash report without the message.
set -u
prefix=$1 src=$2 shardrun=$3
dir=$(mktemp -d /tmp/shardtrain-docprog-XXXXXX); trap 'rm -rf "$dir"' EXIT
fail() { printf '%s\n' "$*"; exit 1; }
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cflags=$(pkg-config --cflags shardtrain) || fail "pkg-config --cflags shardtrain failed"
libs=$(pkg-config --libs shardtrain) || fail "pkg-config --libs shardtrain failed"
example="$src/examples/custom_model"

# Block k of the page into $dir/block-k.cpp.
awk -v dir="$dir" '/^```cpp$/ { n++; out = sprintf("%s/block-%d.cpp", dir, n); next }
                   /^```$/ && out { close(out); out = ""; next }
                   out { print > out }' "$src/docs/library.md"
blocks=$(ls "$dir"/block-*.cpp 2>/dev/null | wc -l)
[ "$blocks" -ge 2 ] || fail "docs/library.md has $blocks cpp blocks; expected its two programs"

compile() {  # compile SOURCE BINARY: with the example's model when the program includes it
  local extra=()
  grep -q '"deep_regressor.hpp"' "$1" && extra=(-I"$example" "$example/deep_regressor.cpp")
  g++ -std=c++20 -O1 -Wall -Wextra -Werror $cflags "$1" "${extra[@]}" -o "$2" $libs \
    > "$2.log" 2>&1 || fail "$(basename "$1") does not compile: $(head -30 "$2.log")"
}

for k in $(seq 1 "$blocks"); do
  compile "$dir/block-$k.cpp" "$dir/program-$k"
  for n in 1 2 4; do
    run=("$shardrun" -n "$n")
    [ "$n" = 1 ] && run=()  # one rank: the program alone, no mpirun
    (cd "$dir" && timeout 120 "${run[@]}" "$dir/program-$k" "$dir/ckpt-$k-$n") > "$dir/out" 2>&1
    rc=$?
    [ $rc = 0 ] || fail "docs/library.md program $k at $n rank(s): exit $rc: $(tail -20 "$dir/out")"
    grep -q '^step ' "$dir/out" || fail "program $k at $n rank(s) printed no step: $(cat "$dir/out")"
    if grep -qi 'finalize\|exited improperly' "$dir/out"; then
      fail "program $k at $n rank(s): $(cat "$dir/out")"
    fi
  done
done

# An exception that escapes main: on rank 1 alone (bad input: exit 2), on every rank (exit 1).
cat > "$dir/escape.cpp" <<'CPP'
#include <stdexcept>
#include <string>

#include "api/rank_context.hpp"
#include "core/error.hpp"

int main(int argc, char** argv) {
  st::RankContext ranks = st::start_ranks();
  if (std::string(argv[argc - 1]) == "input" && ranks.rank() == 1)
    st::fail_input("batch.size = {} is not a multiple of 8", 12);
  if (std::string(argv[argc - 1]) == "every") throw std::runtime_error("the disk went away");
  ranks.group->barrier()->wait();  // rank 0 waits here for rank 1, which never comes
}
CPP
compile "$dir/escape.cpp" "$dir/escape"
timeout 60 "$shardrun" -n 2 "$dir/escape" input > "$dir/out" 2>&1
rc=$?
[ $rc = 2 ] || fail "an InputError escaping main on rank 1: exit $rc, not 2: $(cat "$dir/out")"
grep -q 'rank 1.*batch.size = 12 is not a multiple of 8' "$dir/out" \
  || fail "rank 1's message is missing: $(cat "$dir/out")"
timeout 60 "$shardrun" -n 2 "$dir/escape" every > "$dir/out" 2>&1
rc=$?
[ $rc = 1 ] || fail "a runtime_error escaping main on every rank: exit $rc, not 1: $(cat "$dir/out")"
grep -q 'the disk went away' "$dir/out" || fail "no message: $(cat "$dir/out")"
timeout 60 "$dir/escape" every > "$dir/out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q 'shardtrain: failed: the disk went away' "$dir/out" \
  || fail "one rank without mpirun: exit $rc: $(cat "$dir/out")"
echo "$blocks docs/library.md programs ran at 1, 2 and 4 ranks; escaped exceptions end the job"

#!/usr/bin/env bash
# install_consumer.sh BUILD_DIR SOURCE_DIR SHARDRUN: shardtrain as a library, the way a user
# gets it. `cmake --install` into a fresh prefix; every installed header compiled in a fresh
# consumer with -Wall -Wextra -Werror and a program linked through pkg-config; then
# examples/custom_model (its own CMake project, find_package(shardtrain)) built against the
# prefix, trained at 2 ranks: 30 steps straight and 15 + 15 through a checkpoint give the same
# losses bitwise, and the 2-rank checkpoint resumes at 4 ranks.
set -u
build=$1 src=$2 shardrun=$3
dir=$(mktemp -d /tmp/shardtrain-install-XXXXXX); trap 'rm -rf "$dir"' EXIT
fail() { printf '%s\n' "$*"; exit 1; }
cmake --install "$build" --prefix "$dir/prefix" > "$dir/install.log" 2>&1 \
  || fail "install failed: $(cat "$dir/install.log")"
for lib in core models collectives parallel checkpoint optim api; do
  [ -f "$dir/prefix/lib/libshardtrain_$lib.a" ] || fail "libshardtrain_$lib.a not installed"
done
# The program's commands and the simulator are not the library: neither installed nor linked.
for lib in launch simulate; do
  [ ! -e "$dir/prefix/lib/libshardtrain_$lib.a" ] || fail "libshardtrain_$lib.a is installed"
  [ ! -d "$dir/prefix/include/shardtrain/$lib" ] || fail "$lib/ headers are installed"
done
[ -f "$dir/prefix/lib/cmake/shardtrain/shardtrainConfig.cmake" ] || fail "no CMake package"
# The whole install has the tools; the library component alone has the library and no bin/.
for tool in shardtrain shardtrain-simgrid shardrun; do
  [ -x "$dir/prefix/bin/$tool" ] || fail "bin/$tool not installed by a plain cmake --install"
done
cmake --install "$build" --prefix "$dir/library-only" --component library > "$dir/library.log" 2>&1 \
  || fail "installing the library component failed: $(cat "$dir/library.log")"
[ -f "$dir/library-only/lib/libshardtrain_api.a" ] || fail "--component library: no libshardtrain_api.a"
[ -f "$dir/library-only/lib/pkgconfig/shardtrain.pc" ] || fail "--component library: no shardtrain.pc"
[ ! -e "$dir/library-only/bin" ] || fail "--component library installed bin/: $(ls "$dir/library-only/bin")"

# Every header, compiled as a consumer would (-I, not -isystem: warnings count).
export PKG_CONFIG_PATH="$dir/prefix/lib/pkgconfig"
cflags=$(pkg-config --cflags shardtrain) || fail "pkg-config --cflags shardtrain failed"
libs=$(pkg-config --libs shardtrain) || fail "pkg-config --libs shardtrain failed"
(cd "$dir/prefix/include/shardtrain" && find . -name '*.hpp' | sort | sed 's|^\./|#include "|; s|$|"|') \
  > "$dir/all_headers.cpp"
[ "$(wc -l < "$dir/all_headers.cpp")" -gt 50 ] || fail "too few headers installed"
cat >> "$dir/all_headers.cpp" <<'CPP'
#include <fmt/format.h>
int main() {
  st::GPT gpt(st::GPTConfig{}, st::DType::bf16);  // on meta: specs only
  int64_t n = 0;
  for (const auto& s : gpt.param_specs()) n += s.numel();
  fmt::print("{} parameters\n", n);
  return n > 0 ? 0 : 1;
}
CPP
g++ -Wall -Wextra -Werror $cflags "$dir/all_headers.cpp" -o "$dir/all_headers" $libs \
  > "$dir/cc.log" 2>&1 || fail "the installed headers do not compile cleanly: $(head -40 "$dir/cc.log")"
"$dir/all_headers" | grep -q "parameters" || fail "the pkg-config program did not run"

# The example, a CMake project of its own.
cmake -S "$src/examples/custom_model" -B "$dir/example" -DCMAKE_PREFIX_PATH="$dir/prefix" \
  > "$dir/example.log" 2>&1 || fail "configuring the example failed: $(cat "$dir/example.log")"
cmake --build "$dir/example" -j2 >> "$dir/example.log" 2>&1 \
  || fail "building the example failed: $(tail -40 "$dir/example.log")"
ex="$dir/example/custom_model"
"$shardrun" -n 2 "$ex" --steps 30 > "$dir/straight.txt" 2>&1 || fail "$(cat "$dir/straight.txt")"
"$shardrun" -n 2 "$ex" --steps 30 --ckpt "$dir/ck" --stop-after 15 > "$dir/first.txt" 2>&1 \
  || fail "$(cat "$dir/first.txt")"
cp -r "$dir/ck" "$dir/ck4"
"$shardrun" -n 2 "$ex" --steps 30 --ckpt "$dir/ck" > "$dir/second.txt" 2>&1 || fail "$(cat "$dir/second.txt")"
grep -q "resumed after step 15" "$dir/second.txt" || fail "no resume: $(cat "$dir/second.txt")"
diff <(grep '^step\|^held' "$dir/straight.txt") <(grep -h '^step\|^held' "$dir/first.txt" "$dir/second.txt") \
  || fail "resumed losses differ from the uninterrupted run"
first=$(grep '^step 1 ' "$dir/straight.txt" | sed 's/.*loss \([0-9.e+-]*\).*/\1/')
last=$(grep '^held' "$dir/straight.txt" | sed 's/.*loss //')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.5 * a) }' || fail "the loss did not fall: $first -> $last"
"$shardrun" -n 4 "$ex" --steps 30 --ckpt "$dir/ck4" > "$dir/four.txt" 2>&1 || fail "$(cat "$dir/four.txt")"
grep -q "resumed after step 15" "$dir/four.txt" && grep -q '^held' "$dir/four.txt" \
  || fail "resuming at 4 ranks: $(cat "$dir/four.txt")"
# The programs of docs/library.md, against the same prefix.
bash "$src/tests/library_doc_programs.sh" "$dir/prefix" "$src" "$shardrun" || exit 1
echo "installed, consumed, example trained and resumed (loss $first -> $last)"

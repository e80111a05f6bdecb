#!/usr/bin/env bash
# torch_reference_scripts.sh SOURCE_DIR: the PyTorch references in bench/reference/ run as the
# docs write them (executable: `bench/reference/check_export.py ...`), and where no python3 can
# import torch (here a `torch` module on PYTHONPATH that refuses to import, whether or not
# python3-torch is installed) each says so in one line naming Debian's package, exit 2, after
# trying /usr/bin/python3 too, instead of a traceback.
set -u
src=$1
dir=$(mktemp -d /tmp/shardtrain-torch-XXXXXX); trap 'rm -rf "$dir"' EXIT
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
echo 'raise ImportError("torch refused for this test")' > "$dir/torch.py"
for script in check_export.py pytorch_ddp_gpt.py; do
  path=$src/bench/reference/$script
  [ -x "$path" ] || fail "$script is not executable (git mode 100755)"
  out=$(PYTHONPATH=$dir "$path" --help 2>&1)
  rc=$?
  [ "$rc" = 2 ] || fail "$script without torch exited $rc, want 2: $out"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "$script without torch: want one line, got: $out"
  [[ $out == "$script: needs PyTorch: "*"apt-get install -y python3-torch" ]] ||
    fail "$script without torch does not name python3-torch: $out"
  if [ -x /usr/bin/python3 ]; then
    [[ $out == *" /usr/bin/python3 ("* ]] || fail "$script did not try /usr/bin/python3: $out"
  fi
done
echo "the PyTorch references are executable and name python3-torch when torch is missing"

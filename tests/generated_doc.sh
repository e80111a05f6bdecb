#!/usr/bin/env bash
# generated_doc.sh PAGE COMMAND...: passes when the committed docs PAGE is exactly COMMAND's
# output, so a reference generated from the code cannot drift from it.
set -u
page=$1
shift
if ! out=$("$@" 2>&1); then
  printf '%s failed:\n%s\n' "$*" "$out"; exit 1
fi
if ! diff -u "$page" <(printf '%s\n' "$out") > /dev/null; then
  diff -u "$page" <(printf '%s\n' "$out") | head -40
  printf '\n%s is not what the code generates; regenerate it:\n  %s > %s\n' "$page" "$*" "$page"
  exit 1
fi
echo "$page is current"

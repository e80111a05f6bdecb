#!/usr/bin/env python3
"""portable_kernels.py BUILD_DIR: the files with CPU-specific kernels (intrinsics, target
attributes) compile for any x86-64 as well, without a warning, as -DSHARDTRAIN_PORTABLE=ON
builds them. The default build is -march=native, where a kernel that leans on the build
machine's features (a lambda GCC gives no target attribute, a vector type crossing a function
without one) still compiles: this recompiles each such file of the build's own compile
commands with -march=x86-64 instead, so the portable build cannot break unseen."""
import json
import re
import shlex
import subprocess
import sys

KERNEL = re.compile(r'immintrin\.h|__attribute__\(\(target|avx2_math\.hpp|avx512_math\.hpp|'
                    r'bf16_avx512\.hpp')

UNITY_PART = re.compile(r'^#include "(.*)"$', re.M)


def sources(entry):
    """The sources an entry compiles: its file, or the files a unity batch includes (each kernel
    file is compiled on its own below, as a file-by-file build would)."""
    text = open(entry["file"], encoding="utf-8").read()
    if "/Unity/unity_" in entry["file"]:
        return UNITY_PART.findall(text)
    return [entry["file"]]


commands = json.load(open(f"{sys.argv[1]}/compile_commands.json"))
checked = []
failed = []
for entry, source in ((e, s) for e in commands for s in sources(e)):
    if not KERNEL.search(open(source, encoding="utf-8").read()):
        continue
    args = shlex.split(entry["command"])
    if "-march=native" not in args:
        sys.exit(f"{source}: its compile command has no -march=native: not the default build")
    args = ["-march=x86-64" if a == "-march=native" else a for a in args]
    args[args.index("-o") + 1] = "/dev/null"
    args[args.index("-c") + 1] = source
    run = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True)
    checked.append(source)
    if run.returncode != 0 or run.stderr.strip():
        failed.append(f"{source} (exit {run.returncode}):\n{run.stderr}")
if len(checked) < 5:
    sys.exit(f"only {len(checked)} kernel files found ({checked}): the pattern no longer finds them")
if failed:
    sys.exit("compiled with -march=x86-64, not clean:\n" + "\n".join(failed))
print(f"{len(checked)} kernel files compile for any x86-64 without a warning")

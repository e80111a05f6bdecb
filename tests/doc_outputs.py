#!/usr/bin/env python3
"""tests/doc_outputs.py [--write | --list] [--bin DIR] [PAGE.md...]: every output block in
README.md and docs/*.md is what a real run of its command prints. Without --write it runs each
page's commands and compares (exit 1 naming each block that drifted, with the run's lines);
with --write it runs them as written and rewrites the blocks that drifted (a block that still
compares equal keeps the numbers of the run it shows); --list names every block and what
accounts for it. --bin is the folder of the built binaries (default build/bin); the pages
default to README.md and docs/*.md. The test cli.doc_outputs runs the check.

WHICH BLOCKS ARE OUTPUTS. Every fenced block without a language, or marked `console`, is one of:
  1. marked `<!-- output: COMMAND -->` on the line before its fence: what COMMAND prints;
  2. marked `<!-- output -->` and holding `$ COMMAND` lines (a transcript): each command (with
     its `\\` continuation lines) runs, and the lines after it up to the next `$` are its output;
  3. in README.md, a block right after a `<!-- tour -->` command block (the tour's
     convention): the output of that block's commands;
  4. inside `<!-- results: ... -->` ... `<!-- /results -->`: a measurement, with its date and
     CPU, rendered from bench/results/ by bench/results-block (checked by
     cli.docs_results_current), not an output to regenerate;
  5. listed in LEFT_OUT below, with why it is not run.
A block that is none of these fails the check: mark a new output block or list it here.

HOW COMMANDS RUN. Each page's commands (its tour blocks too, in README.md) run in the page's
order, with bash from the source folder: `build/bin/` means --bin (also first on PATH, for a
bare `shardtrain`), /tmp/tour a scratch folder of the page's own (removed after), and in the
check XDG_CACHE_HOME is in it too (nothing is written outside it). A command repeated on a
page, or on another page without /tmp/tour, runs once. In the output the scratch folder reads
/tmp/tour again and $HOME `~`. Output is stdout and stderr; the exit status must be 0, except
in transcripts (they show errors). The check runs a tenth of the steps (max_steps=,
checkpoint.every= and step-NNNNNNNN divided by 10, at least 1), to stay quick; --write runs
the commands as written.

HOW A BLOCK IS COMPARED. Runs of spaces count as one (columns widen with their numbers). A
block without `...` lines is the whole output, line for line; with them it is an excerpt: its
other lines must be lines of the output, in the order shown (each after the previous).
`shardtrain simulate` on a cluster given by its rates (every simulate block here) prints the
same on every machine: compared exactly, all but the sim_s column (the simulator's own wall
time, the number after the MFU share). Every other output is compared with these masked (any value matches):
  - numbers followed by a unit of time, rate or share: ms, s, %, tok/s, FLOP/s and B/s with any
    prefix (step and checkpoint times, eta, MFU, throughput), and MFU's `?!` mark (a matmul
    peak measured while other jobs loaded the cores);
  - the numbers after `loss`, `loss:`, `val`, `norm`, `lr`, `rss`, `exposed`, `eta` (also
    `1m05s`) and before `bits per`: losses and norms differ in their last digits between CPUs
    and matmul paths, rss is measured, and the check runs a tenth of the steps (another
    learning-rate schedule, other losses);
  - step numbers: `step N/M`, `step-NNNNNNNN`, `after step N`, `(step N)`, `| step N`;
  - what describes the machine, not shardtrain: the CPU features on the first line (between
    `cpu:` and `|`), its thread count (`x N threads`: the cores over the ranks), the value of
    every `key: value` field of the `oneDNN` line (its version, each matmul path and kernel),
    the whole `matmul peak` line (measured), `on top of N MiB` (the process's measured size),
    and the packed GEMM's workspace term `+ matmul packing N` (only where BF16 is widened),
    with the budget's total when one side has that term and the other not.
ACTIVATIONS: the activations' size depends on the CPU too (the AVX512-BF16 attention keeps its
tiles per thread, where the general one holds scores and their gradient for every head), so the
`activations N` term and the total of the start-up budget line, the line of activations by
checkpointing mode, and simulate's mem_GiB column and a memory row's total, activation terms
and workspace (the packed GEMM's, where BF16 is widened), are masked as well.
Everything else is compared exactly: the model line and its parameter count, every budget
term, the data and traffic lines, the units, eval's token and window counts, paths, the order
and the words of every line.

WHAT A PAGE CLAIMS beyond its lines is checked on the same run (CLAIMS below): the README's
4-rank run follows the one-process run within 0.1% at step 5, and its plot is a PNG.

LEFT_OUT: blocks deliberately not run, by page and words the block holds, each with why."""
import difflib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

LEFT_OUT = {
    ("README.md", "FP32 master shard (1/N of a unit)"): "a diagram, not an output",
    ("docs/architecture.md", "FP32 master shard (this rank's 1/N of a unit)"):
        "a diagram, not an output",
    ("docs/data.md", "check_export.py --make-random q3"):
        "the Hugging Face loop needs npm (Qwen3's tokenizer), PyTorch (the random Qwen3 folder, "
        "the reference loss), tiny Shakespeare and minutes; cli.hf_tokenizer_loop runs the same "
        "loop on the suite's Qwen3 tokenizer (tokenize, train at 2 ranks, sharded export, eval, "
        "init_from, sample) and checks its lines",
    ("docs/getting-started.md", "shardtrain | cpu: AVX2 FMA no-AVX512"):
        "another CPU's summary (AVX2 only), shown for the kernel lines that differ there; a run "
        "here cannot print it",
    ("docs/reliability.md", "restart 1 of 3 | why: rank 1"):
        "a restart after a killed rank: its host name and the steps recomputed vary from run to "
        "run; tests/elastic.sh (cli.elastic.lost_rank and others) checks the line field by field",
}

FENCE = re.compile(r"^\s*```(\S*)\s*$")
MARK = re.compile(r"^<!-- output(?:: (.*?))? -->$")


class Block:
    def __init__(self, page, start, end, kind, commands, lines):
        self.page, self.start, self.end = page, start, end  # fence lines, 0-based
        self.kind, self.commands, self.lines = kind, commands, lines


def transcript(lines):
    """[(command, its lines as shown, [output lines])] of a block of `$ COMMAND` lines."""
    steps, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise ValueError(f"a transcript line before any '$ COMMAND': {lines[i]!r}")
        first, command = i, lines[i][2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        i += 1
        shown, out = lines[first:i], []
        while i < len(lines) and not lines[i].startswith("$ "):
            out.append(lines[i])
            i += 1
        steps.append((" ".join(command.split()), shown, out))
    return steps


def find_blocks(page, text):
    """The page's output blocks (Block) and tour command blocks, in order, and a catalogue of
    every block without a language: (line, what accounts for it), None where nothing does."""
    lines = text.split("\n")
    items, found = [], []
    in_results, last_tour_end, i = False, None, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("<!-- results:"):
            in_results = True
        elif line.startswith("<!-- /results"):
            in_results = False
        m = FENCE.match(line)
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        i += 1
        while i < len(lines) and not FENCE.match(lines[i]):
            i += 1
        body, before = lines[start + 1:i], lines[start - 1] if start else ""
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        if lang == "sh" and before == "<!-- tour -->":
            items.append(("tour", [c for c in body if c.strip()]))
            last_tour_end = i
        elif lang in ("", "console"):
            mark = MARK.match(before)
            after_tour = last_tour_end is not None and prev.strip() == "```" and all(
                not s.strip() for s in lines[last_tour_end + 1:start])
            block = None
            if in_results:
                found.append((start, "a measurement, checked by bench/results-block"))
            elif mark and mark.group(1):
                block = Block(page, start, i, "command", [mark.group(1)], body)
            elif mark:
                block = Block(page, start, i, "transcript", [c for c, _, _ in transcript(body)],
                              body)
            elif after_tour:
                block = Block(page, start, i, "tour", items_last_tour(items), body)
            else:
                found.append((start, left_out(page, body)))
            if block:
                items.append(("block", block))
                found.append((start, f"{block.kind}: {' && '.join(block.commands)}"))
        i += 1
    return items, found


def items_last_tour(items):
    return next(cmds for kind, cmds in reversed(items) if kind == "tour")


def left_out(page, body):
    """Why the block is left out ("left out: ..."), or None."""
    text = "\n".join(body)
    return next((f"left out: {why}" for (p, words), why in LEFT_OUT.items()
                 if p == page and words in text), None)


def tenth(command):
    command = re.sub(r"(max_steps=|checkpoint\.every=)(\d+)",
                     lambda m: m.group(1) + str(max(1, int(m.group(2)) // 10)), command)
    return re.sub(r"step-(\d{8})", lambda m: "step-%08d" % max(1, int(m.group(1)) // 10), command)


# Outputs of commands that use no scratch folder, shared by the pages (the README's HSDP run is
# also docs/multi-host.md's).
SHARED = {}


class Runner:
    """Runs a page's commands in order in its scratch folder; each command once."""

    def __init__(self, bin_dir, scratch, write):
        self.bin, self.scratch, self.write, self.done = bin_dir, scratch, write, {}
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDTRAIN_")}
        self.env["PATH"] = f"{bin_dir}:{self.env.get('PATH', '')}"
        self.env["OMP_WAIT_POLICY"] = "passive"
        if not write:  # the check writes nothing outside its scratch folder (the peak's cache)
            self.env["XDG_CACHE_HOME"] = os.path.join(scratch, "cache")

    def run(self, command):
        done = self.done if "/tmp/tour" in command else SHARED
        if command not in done:
            line = command if self.write else tenth(command)
            line = line.replace("build/bin/", self.bin + "/").replace("/tmp/tour", self.scratch)
            p = subprocess.run(["bash", "-c", line], cwd=ROOT, env=self.env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            out = p.stdout.replace(self.scratch, "/tmp/tour").replace(self.bin + "/", "build/bin/")
            if os.environ.get("HOME", "/") != "/":
                out = out.replace(os.environ["HOME"].rstrip("/") + "/", "~/")
            done[command] = (p.returncode, [l.rstrip() for l in out.rstrip("\n").split("\n")])
        return done[command]


UNIT = r"(?=\s?(?:ms|s|tok/s|[kMGTP]?FLOP/s|[kMGT]i?B/s)\b)"


def mask(line, simulate):
    """The line as compared: spaces collapsed, what may differ between runs masked as '#'."""
    line = " ".join(line.split())
    if simulate:  # sim_s: the number after the MFU share, before the collective waited on
        line = re.sub(r"(% )\d+\.\d+( [^\s\d])", r"\1#\2", line)
        # --plan: its own wall time, and its rows' mem_GiB (ACTIVATIONS below).
        line = re.sub(r"layouts in [\d.]+ s:", "layouts in # s:", line)
        if "memory per pipeline rank, GiB:" in line:  # each pipeline rank's budget (ACTIVATIONS)
            line = re.sub(r"(rank \d+) [\d.]+", r"\1 #", line)
        line = re.sub(r"^(\d+ .* [\d.]+ [\d.]+% [\d.]+ [\d.]+% [\d.]+%) [\d.]+$", r"\1 #", line)
        # The activations' size depends on the CPU that runs simulate (ACTIVATIONS below): the
        # table's mem_GiB column, and a memory row's total and activation terms.
        line = re.sub(r"^(\d+ \S+ \d+x\d+(?: [-\d.]+%?){6}) [\d.]+ ", r"\1 # ", line)
        return re.sub(
            r"^(\d+ \S+ \d+x\d+) [\d.]+ = (.*) \+ [\d.]+ \[[\d.]+ / [\d.]+ / [\d.]+\] \+ [\d.]+$",
            r"\1 # = \2 + # [# / # / #] + #", line)
    if line.startswith("memory per rank (budget)"):  # ACTIVATIONS below
        line = re.sub(r"activations [\d.]+", "activations #", line)
        line = re.sub(r"= [\d.]+ MiB", "= # MiB", line)
    if line.startswith("activations per rank by"):
        line = re.sub(r"(none|selective|full) [\d.]+", r"\1 #", line)
    if line.startswith("shardtrain | cpu:"):
        line = re.sub(r"cpu: [^|]*\|", "cpu: * |", line)
        line = re.sub(r"x \d+ threads?\b", "x # threads", line)
    if line.startswith("oneDNN "):
        line = re.sub(r"(:) [^|]*", r"\1 *", re.sub(r"^oneDNN \S+", "oneDNN *", line))
    if line.startswith("matmul peak"):
        return "matmul peak *"
    line = re.sub(r"on top of [\d.]+ MiB", "on top of # MiB", line)
    line = re.sub(r"\beta [\dhms.]+", "eta #", line)
    line = re.sub(r"\d+(?:\.\d+)?" + UNIT, "#", line)
    line = re.sub(r"\d+(?:\.\d+)?%", "#%", line)
    # MFU's mark of an implausible share: the start-up's matmul peak measured while other jobs
    # loaded the cores (CI) can put a step's MFU over 100%.
    line = re.sub(r"mfu (#%)?\?!", "mfu #%", line)
    line = re.sub(r"\b(loss:?|val|norm|lr|rss|exposed) [-+\d.e]+", r"\1 #", line)
    line = re.sub(r"[\d.]+ bits per", "# bits per", line)
    line = re.sub(r"\bstep #?\d*/#?\d*", "step #/#", line)
    line = re.sub(r"step-\d{8}", "step-#", line)
    return re.sub(r"(after step|\(step|\| step) \d+", r"\1 #", line)


def without_packing(a, b):
    """a and b with the packed GEMM's workspace term dropped, and the budget's total masked
    where only one of them has it."""
    pack = re.compile(r" \+ matmul packing [\d.]+")
    if bool(pack.search(a)) != bool(pack.search(b)):
        a, b = (re.sub(r"= [\d.]+ MiB", "= # MiB", pack.sub("", x)) for x in (a, b))
    return pack.sub("", a), pack.sub("", b)


def same(shown, got, simulate):
    a, b = mask(shown, simulate), mask(got, simulate)
    if not simulate:
        a, b = without_packing(a, b)
    return a == b


def compare(shown, got, simulate):
    """None when `shown` (a block's lines) is `got` (the run's) or an excerpt of it, else why."""
    if "..." not in shown:
        if len(shown) == len(got) and all(same(a, b, simulate) for a, b in zip(shown, got)):
            return None
        diff = difflib.unified_diff([mask(x, simulate) for x in shown],
                                    [mask(x, simulate) for x in got], "shown", "run", lineterm="")
        return "\n".join(list(diff)[:40])
    pos = 0
    for line in shown:
        if line == "...":
            continue
        k = next((k for k in range(pos, len(got)) if same(line, got[k], simulate)), None)
        if k is None:
            return (f"no line of the run, after its line {pos}, matches:\n  {line}\n"
                    f"  (as compared: {mask(line, simulate)})")
        pos = k + 1
    return None


def regenerate(shown, got, simulate):
    """The block as --write leaves it: unchanged where it still compares equal (its numbers stay
    those of the run it shows), else rewritten from this run: whole, or for an excerpt each
    drifted line replaced by the run's line most like it (after the previous one)."""
    if "..." not in shown:
        return shown if compare(shown, got, simulate) is None else got
    out, pos = [], 0
    for line in shown:
        if line == "...":
            out.append(line)
            continue
        nums = re.findall(r"\d+", line)[:2]

        def score(k):
            g = got[k]
            return (2 * same(line, g, simulate) + difflib.SequenceMatcher(None, line, g).ratio() +
                    0.5 * (re.findall(r"\d+", g)[:2] == nums))
        if pos >= len(got):
            raise RuntimeError(f"the run has fewer lines than the excerpt shows: {line}")
        k = max(range(pos, len(got)), key=score)
        out.append(line if same(line, got[k], simulate) else got[k])
        pos = k + 1
    return out


def block_output(block, runner):
    """[(a transcript command's lines or None, shown lines, run lines, status ok)] of the block."""
    if block.kind == "transcript":
        return [(shown_cmd, out, runner.run(cmd)[1], True)
                for cmd, shown_cmd, out in transcript(block.lines)]
    lines, ok = [], True
    for cmd in block.commands:
        rc, out = runner.run(cmd)
        ok = ok and rc == 0
        lines += out
    return [(None, block.lines, lines, ok)]


def catalogue(page):
    """One line per block without a language on the page: where, and what accounts for it."""
    _, found = find_blocks(page, (ROOT / page).read_text())
    return [f"{page}:{line + 1}: {what or 'UNMARKED'}" for line, what in found]


def loss_at(step, lines):
    """The loss on the `step STEP/M` line of a run's output, or None."""
    for line in lines:
        m = re.match(rf"step +{step}/\d+ \| loss ([\d.]+) ", line)
        if m:
            return float(m.group(1))
    return None


def readme_claims(items, runner, scratch):
    """Why the README's tour breaks what the README says of it (its numbers are masked in the
    comparison): the 4-rank run's losses follow the one-process run's within 0.1% (BF16), and
    the plot is a PNG."""
    tour = [cmd for kind, cmds in items if kind == "tour" for cmd in cmds]
    one = next((c for c in tour if c.startswith("build/bin/shardtrain train")), None)
    four = next((c for c in tour if c.startswith("launch/shardrun -n 4 build/bin/shardtrain train")),
                None)
    if not one or not four:
        return ["the tour has no one-process and 4-rank training runs to compare"]
    a, b = loss_at(5, runner.run(one)[1]), loss_at(5, runner.run(four)[1])
    why = []
    if a is None or b is None or not (a > 0 and abs(a - b) / a <= 1e-3):
        why.append(f"the 4-rank loss at step 5 ({b}) is not within 0.1% of one rank's ({a})")
    png = pathlib.Path(scratch, "runs.png")
    if not png.is_file() or png.read_bytes()[:4] != b"\x89PNG":
        why.append("the tour's plot /tmp/tour/runs.png is not a PNG")
    return why


# What a page says of its outputs beyond the lines it shows (run by the check alone).
CLAIMS = {"README.md": readme_claims}


def check_page(page, bin_dir, write):
    path = ROOT / page
    text = path.read_text()
    items, found = find_blocks(page, text)
    lines = text.split("\n")
    failures = [f"{page}:{k + 1}: {lines[k + 1] if k + 1 < len(lines) else ''}\n  an output "
                f"block without <!-- output: COMMAND --> (or in LEFT_OUT of "
                f"tests/doc_outputs.py with why)" for k, what in found if what is None]
    blocks = [b for kind, b in items if kind == "block"]
    if not blocks:
        return failures
    scratch = tempfile.mkdtemp(prefix="shardtrain-doc-outputs-")
    try:
        runner = Runner(bin_dir, scratch, write)
        new_bodies = {}
        for kind, item in items:
            if kind == "tour":
                for cmd in item:
                    runner.run(cmd)
                continue
            block = item
            simulate = all(re.search(r"shardtrain simulate(?! calibrate)", c)
                           for c in block.commands)
            body = []
            for cmd, shown, got, ok in block_output(block, runner):
                if not ok:
                    failures.append(f"{page}:{block.start + 1}: `{' && '.join(block.commands)}` "
                                    f"failed:\n" + "\n".join(got[-20:]))
                    break
                body += (cmd or []) + (regenerate(shown, got, simulate) if write else shown)
                why = None if write else compare(shown, got, simulate)
                if why:
                    failures.append(f"{page}:{block.start + 1}: the block drifted from "
                                    f"`{' && '.join(block.commands)}`:\n{why}")
            new_bodies[block.start] = (block.end, body)
        if not write and page in CLAIMS:
            failures += [f"{page}: {why}" for why in CLAIMS[page](items, runner, scratch)]
        if write:
            out, i = [], 0
            while i < len(lines):
                if i in new_bodies:
                    end, body = new_bodies[i]
                    out += [lines[i]] + body + [lines[end]]
                    i = end + 1
                else:
                    out.append(lines[i])
                    i += 1
            if out != lines:
                path.write_text("\n".join(out))
                print(f"{page}: rewritten")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return failures


def main():
    args = sys.argv[1:]
    write = "--write" in args
    args = [a for a in args if a != "--write"]
    bin_dir = str(ROOT / "build/bin")
    if "--bin" in args:
        k = args.index("--bin")
        bin_dir = str(pathlib.Path(args[k + 1]).resolve())
        del args[k:k + 2]
    pages = [a for a in args if a != "--list"] or ["README.md"] + sorted(
        f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
    if "--list" in args:
        for page in pages:
            for line in catalogue(page):
                print(line)
        return 0
    failures = []
    for page in pages:
        page = str(pathlib.Path(page).resolve().relative_to(ROOT)) if os.path.isabs(page) else page
        failures += check_page(page, bin_dir, write)
    for f in failures:
        print(f"FAIL {f}\n")
    if failures:
        print("regenerate the drifted blocks: tests/doc_outputs.py --write [--bin DIR] PAGE.md")
        return 1
    print(f"the output blocks of {len(pages)} page(s) are what their commands print")
    return 0


if __name__ == "__main__":
    sys.exit(main())

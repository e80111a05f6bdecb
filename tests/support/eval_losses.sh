# Sourced by the scripts that evaluate one model several ways (1 and 2 ranks, weights and
# checkpoint) and want the same loss from each.
# json_loss: the "loss" of `eval --json`'s output on standard input.
json_loss() { sed -n 's/.*"loss":\([0-9.e+-]*\).*/\1/p'; }
# losses_agree MIN A B...: A is a loss above MIN and every other is within 1e-5 of it
# (relative): the same to rounding.
losses_agree() {
  awk -v min="$1" 'BEGIN {
    a = ARGV[2]
    if (!(a != "" && a + 0 > min)) exit 1
    for (i = 3; i < ARGC; i++) {
      d = ARGV[i] - a; if (d < 0) d = -d
      if (ARGV[i] == "" || d > 1e-5 * a) exit 1
    }
  }' "$@"
}

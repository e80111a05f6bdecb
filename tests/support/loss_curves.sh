# Sourced by the scripts that compare a run's loss curve with another's (tensor-parallel meshes
# against one rank).
# losses FILE: step<TAB>loss for each step record of a metrics file.
losses() { grep '"loss":' "$1" | sed -E 's/.*"loss":([-0-9.e+]+).*"step":([0-9]+).*/\2\t\1/'; }
# same_losses REF RUN N: RUN holds N of REF's steps, each loss within 1e-5 of REF's (relative).
same_losses() {
  join <(losses "$1" | sort) <(losses "$2" | sort) | awk -v want="$3" '
    { d = $2 - $3; if (d < 0) d = -d; r = d / $2; rows++
      if (r > 1e-5) { printf "step %d: %s vs %s (%.2g relative)\n", $1, $2, $3, r; bad = 1 } }
    END { if (rows != want) { printf "%d steps compared, want %d\n", rows, want; bad = 1 }
          exit bad }'
}

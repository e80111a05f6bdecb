#!/usr/bin/env bash
# simulate_refusals.sh SHARDTRAIN CONFIGS: `simulate` refuses what it cannot do before any
# simulation, each time with exit 2 and one line naming the flag or key and its valid range:
# a run whose engine would outgrow --max-memory (a million nodes took 24 GB and was killed),
# a --plot it could not write (once found only after the whole simulation, as "plot: --out"),
# --max-ring-steps below 0 (once accepted), --ranks beyond the simulator's bound, and cluster
# values out of range (once "1000000000 must be >= 1", "1e308 must be > 0", and nodes x ranks
# per node past an int's reach), and pipeline meshes it cannot lay out.
set -u
st=$1 configs=$2
dir=$(mktemp -d /tmp/shardtrain-simrefuse-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
cases=0

# refused REGEX ARGS...: `shardtrain simulate ARGS` exits 2 with exactly one line, matching REGEX.
refused() {
  local pattern=$1
  shift
  cases=$((cases + 1))
  "$st" simulate "$@" > "$dir/out" 2>&1
  local rc=$?
  [ "$rc" = 2 ] || fail "exit $rc (want 2) for simulate $*: $(cat "$dir/out")"
  [ "$(wc -l < "$dir/out")" = 1 ] || fail "not one line for simulate $*: $(cat "$dir/out")"
  grep -Eq -- "$pattern" "$dir/out" || fail "simulate $*: '$(cat "$dir/out")' does not match /$pattern/"
}

# The engine's memory, estimated before it starts (a small limit keeps this fast).
refused "simulate: 1024 ranks as hsdp 8x128 would take an estimated 0\.[0-9]+ GiB in the engine \(1024 ranks simulated, 4096 actors: --all-nodes\), over the limit of 0\.05 GiB \(--max-memory\); drop --all-nodes" \
  --config tiny --cluster ib-200g-64x8 --ranks 1024 --mesh hsdp --all-nodes --max-memory 0.05 \
  training.global_batch=1024
refused "simulate: 8000000 ranks as [a-z]+ [0-9]+x[0-9]+ would take an estimated [0-9.]+ GiB in the engine \(8000000 ranks simulated, [0-9]+ actors: every node, as this mesh's nodes do not behave alike\), over the limit of 4\.00 GiB \(--max-memory\); 3 of the 3 rows are over it" \
  --config tiny --cluster "$configs/cluster_million_nodes.toml" --max-memory 4 \
  training.global_batch=8000000
refused "^shardtrain: error: --max-memory -1 must be in \[0, 1048576\] GiB" \
  --config tiny --cluster ib-200g-64x8 --max-memory -1

# Pipeline parallelism: stages that do not divide the ranks, and micro-batches the schedule
# cannot run with, named by key as train names them.
refused "^shardtrain: error: --ranks 6: parallel.tp = 1 x parallel.pp = 4 does not divide it$" \
  --config tiny --cluster ib-200g-64x8 --ranks 6 parallel.pp=4
refused "^shardtrain: error: training.micro_batches = 1: interleaved_1f1b takes the micro-batches in groups of parallel.pp = 2" \
  --config tiny --cluster ib-200g-64x8 --ranks 4 --mesh fsdp parallel.pp=2 \
  parallel.pp_schedule=interleaved_1f1b parallel.pp_virtual_stages=2

# --plot, checked before the simulation (the table is not printed first) and named as --plot.
mkdir -p "$dir/plots" "$dir/taken.png"
refused "^shardtrain: error: --plot '$dir/plots' must be a file name ending in \.png or \.svg$" \
  --config tiny --cluster ethernet-25g-8x16 training.global_batch=128 --plot "$dir/plots"
refused "^shardtrain: error: --plot: '$dir/taken.png' is a directory" \
  --config tiny --cluster ethernet-25g-8x16 training.global_batch=128 --plot "$dir/taken.png"
[ -z "$(ls -A "$dir/taken.png")" ] || fail "a refused --plot left files behind: $(ls -A "$dir/taken.png")"

# Flags out of range.
refused "^shardtrain: error: --max-ring-steps -1 must be in \[0, 2147483647\] \(0: simulate every step" \
  --config tiny --cluster ethernet-25g-8x16 training.global_batch=128 --max-ring-steps -1
refused "^shardtrain: error: --ranks: 2000000000 must be in \[1, 16777216\]$" \
  --config tiny --cluster ethernet-25g-8x16 --ranks 8,2000000000

# --plan: one rank count, no --mesh, --top from 0, whole nodes, a batch that splits, and a
# cluster whose memory fits no layout (the smallest budget named, with its largest term).
refused "^shardtrain: error: simulate --plan plans one rank count; --ranks gave 2$" \
  --plan --config tiny --cluster ethernet-25g-8x16 --ranks 2,4
refused "^shardtrain: error: simulate --plan searches the meshes itself; drop --mesh$" \
  --plan --config tiny --cluster ethernet-25g-8x16 --mesh fsdp
refused "^shardtrain: error: --top -1 must be 0 \(every layout that fits\) or more$" \
  --plan --config tiny --cluster ethernet-25g-8x16 --top -1
refused "^shardtrain: error: --ranks 20: not a whole number of the cluster's nodes of 16 ranks$" \
  --plan --config tiny --cluster ethernet-25g-8x16 --ranks 20
refused "^shardtrain: error: simulate --plan: training\.global_batch = 1 splits over the data-parallel ranks of no layout of 64 ranks" \
  --plan --config tiny --cluster ib-200g-64x8 --ranks 64 training.global_batch=1
refused "^shardtrain: error: simulate --plan: none of the [0-9]+ layouts of 4 ranks fits 'tiny-memory' \(1\.0 MiB a rank\): the smallest, [A-Za-z0-9_ ]+, needs [0-9.]+ MiB, most of it [a-z ]+; more ranks" \
  --plan --config tiny --cluster "$configs/cluster_tiny_memory.toml" --ranks 4

# Cluster values out of range name the range.
cluster() {  # NAME KEY-LINE...: a valid cluster with extra lines
  local name=$1
  shift
  { printf '%s\n' "$@"; printf '[compute]\nmatmul_gflops = 100\nmemory_gbps = 10\n[intra_node]\nbandwidth_gbps = 10\n'; } > "$dir/$name.toml"
}
cluster nodes 'nodes = 1000000000' 'ranks_per_node = 2'
refused "nodes\.toml: 'nodes' = 1000000000 must be a whole number of nodes in \[1, 1048576\]$" \
  --config tiny --cluster "$dir/nodes.toml"
cluster world 'nodes = 1048576' 'ranks_per_node = 4096' '[inter_node]' 'bandwidth_gbit = 25'
refused "world\.toml: 'nodes' x 'ranks_per_node' = 1048576 x 4096 ranks must be at most 16777216$" \
  --config tiny --cluster "$dir/world.toml"
for bw in 1e308:'1e\+308' 1e-300:1e-300; do  # as written : as shown
  cluster fast 'nodes = 2' 'ranks_per_node = 2' '[inter_node]' "bandwidth_gbit = ${bw%%:*}"
  refused "fast\.toml: 'inter_node\.bandwidth_gbit' = ${bw#*:} must be a finite positive number in \[1e-09, 1e\+12\] Gbit/s$" \
    --config tiny --cluster "$dir/fast.toml"
done
# A calibration row that contradicts the cluster (faster than its stated rates allow), one
# beside stated efficiencies, one without its throughput or its model, and an unknown mesh.
cluster calfast 'nodes = 1' 'ranks_per_node = 2' '[calibration]' 'config = "tiny"' 'ranks = 2' \
  'tokens_per_s_per_rank = 1e9'
refused "calfast\.toml' \[calibration\]: 1000000000 tokens/s a rank is more than the cluster's stated rates allow for that row at full efficiency \([0-9]+ tokens/s a rank" \
  --config tiny --cluster "$dir/calfast.toml"
cluster caleff 'nodes = 1' 'ranks_per_node = 2' '[calibration]' 'ranks = 2' \
  'tokens_per_s_per_rank = 100'
sed -i 's/^\[compute\]$/[compute]\nmatmul_efficiency = 0.5/' "$dir/caleff.toml"
refused "caleff\.toml: \[calibration\] fits compute\.matmul_efficiency and memory_efficiency; drop them or the row$" \
  --config tiny --cluster "$dir/caleff.toml"
cluster calnone 'nodes = 1' 'ranks_per_node = 2' '[calibration]' 'ranks = 2'
refused "calnone\.toml: \[calibration\] needs ranks and tokens_per_s_per_rank" \
  --config tiny --cluster "$dir/calnone.toml"
cluster calnocfg 'nodes = 1' 'ranks_per_node = 2' '[calibration]' 'ranks = 2' \
  'tokens_per_s_per_rank = 100'
refused "calnocfg\.toml: \[calibration\] needs config \(the row's model" \
  --config tiny --cluster "$dir/calnocfg.toml"
cluster calmesh 'nodes = 1' 'ranks_per_node = 2' '[calibration]' 'ranks = 2' \
  'tokens_per_s_per_rank = 100' 'mesh = "zero3"'
refused "calmesh\.toml: 'calibration\.mesh' = 'zero3' must be fsdp, hsdp, ddp or config$" \
  --config tiny --cluster "$dir/calmesh.toml"
echo "ok: $cases refusals, each exit 2 and one line naming the flag or key"

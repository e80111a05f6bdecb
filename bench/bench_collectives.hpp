#pragma once
namespace st {
struct CommonOptions;
// shardtrain bench collectives: all_gather (BF16) and reduce_scatter (FP32) over every
// algorithm beside memcpy of the same bytes, and all_reduce (FP32, MPI's), 4 KiB to
// `max_bytes`; medians; table or JSON.
int run_bench_collectives(bool json, long long max_bytes);
}  // namespace st

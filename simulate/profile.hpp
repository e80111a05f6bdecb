#pragma once
// A calibration profile: what `shardtrain simulate calibrate` measured on one machine. Compute
// comes from the runtime's own trace spans at the config's shapes (per unit, per micro-batch,
// at several rows per rank and threads per rank); links are α-β fits of the runtime's own
// collectives over shared memory and over TCP between emulated hosts.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/family.hpp"
#include "simulate/alpha_beta.hpp"
#include "simulate/segment_times.hpp"

namespace st {

// The model the compute was measured at (vocabulary already padded): its family, the keys
// every family reads and the family's own keys in effect (n_kv_head, ffn_hidden, ...), so a
// profile is taken as the measurement of exactly that model and scaled to any other.
struct ProfiledModel {
  int64_t n_layer = 0, n_embd = 0, n_head = 0, vocab = 0, seq_len = 0;
  std::string activation_checkpointing = "none";
  std::string param_dtype = "bf16";
  std::string family = "gpt2";
  std::map<std::string, OwnValue> own = {};  // "model.n_kv_head" -> 2
  bool operator==(const ProfiledModel&) const = default;
};

// One measured micro-batch at `rows` sequences per rank and `threads` threads while `ranks`
// ranks shared the machine (so their interference, and that of their communication threads,
// is in the numbers), seconds; rank 0's, waits on collectives taken out.
// Its segments (SegmentTimes, total(): the micro-batch's compute) are blocks 1..L in unit order.
struct ComputeSample : SegmentTimes {
  int ranks = 1;    // ranks computing at once on the machine while it was measured
  int threads = 1;  // each
  int64_t rows = 1;
  double matmul_share = 0;           // of the micro-batch's compute, in oneDNN matmuls
  double optimizer_per_element = 0;  // norm + clip + AdamW, s per master element
  double step_overhead = 0;          // per step outside units and optimizer (batch, bookkeeping)
};

// α-β of one link class for the runtime's two big collectives, measured with `ranks` ranks
// sharing the machine (oversubscribed ranks wait on each other's time slices: a different α).
struct LinkFit {
  int ranks = 2;
  AlphaBeta all_gather, reduce_scatter;
  // MPI's all-reduce (HSDP's and DDP's replica sync), per step of a ring's 2(p - 1); zero when
  // not measured (then the ring of the two above stands for it).
  AlphaBeta all_reduce;
};

struct CalibrationProfile {
  std::string machine;  // a description of where it was measured
  int cores = 1;        // the machine's cores
  // What the compute times depend on besides the cores; empty in profiles from before they
  // were recorded. A profile is only valid where all three match.
  std::string cpu;           // the processor's brand string
  std::string cpu_features;  // e.g. "AVX2 FMA no-AVX512 no-AVX512-BF16 no-AMX"
  std::string matmul;        // matmul_identity(param_dtype) when measured
  ProfiledModel model;
  std::vector<ComputeSample> compute;
  double memcpy_bandwidth = 0;        // bytes/s, one thread
  std::map<int, double> matmul_peak;  // threads -> the measured BF16 matmul peak, FLOP/s
  // "shm" (the shared-memory window, per operation), "ring-shm" and "tcp", "tcp-1gbit", ...
  // (per ring step); each at one or more rank counts.
  std::map<std::string, std::vector<LinkFit>> links;

  // The fit of link `name` measured nearest `ranks_per_core` ranks per core; an InputError
  // naming `who` when the profile has no such link.
  const LinkFit& link(const std::string& name, const std::string& who, double ranks_per_core) const;
};

// JSON text of a profile, and back (an InputError naming `where` and the field at fault).
std::string profile_to_json(const CalibrationProfile& profile);
CalibrationProfile profile_from_json(const std::string& text, const std::string& where);
CalibrationProfile read_profile(const std::string& path);

}  // namespace st

#pragma once
// Pipeline parallelism's schedules as data: for each pipeline rank, the ordered list of what it
// computes in a step (a micro-batch's forward, backward, or the backward's two halves: the input
// gradient and the weight gradient) on which of its stages. The runtime executes a rank's list
// in order (the activations and their gradients cross between stages over send/recv, posted
// ahead), and the simulator replays the same lists with time (simulate_pipeline below), so the
// two cannot drift apart.
//
// Stages: P ranks x V virtual stages per rank = P·V stages of contiguous blocks, stage s on rank
// s % P (Megatron's interleaving: rank r holds stages r, r + P, r + 2P, ...). The schedules:
//  - gpipe:            every forward, then every backward (V = 1; M micro-batches in flight).
//  - 1f1b:             P - 1 - r forwards of warm-up, then one forward and one backward in turn,
//                      then the remaining backwards (V = 1; at most P - r in flight).
//  - interleaved_1f1b: Megatron's order over V virtual stages, micro-batches in groups of P
//                      (M a multiple of P); the bubble shrinks by V.
//  - zero_bubble:      ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism"): 1F1B's forwards
//                      and input-gradient halves in 1F1B's order, each weight-gradient half
//                      deferred into the first place where its rank would otherwise wait, rank
//                      r deferring at most r of them (found by replaying the order with equal
//                      F, B and W times); the rest at the end. Rank r then holds up to r more
//                      micro-batches than under 1F1B, P at most, 1F1B's peak (rank 0's).
//                      Bubble (P-1)(F+B-W) against 1F1B's (P-1)(F+B+W) once M >= P.
#include <string>
#include <vector>

namespace st {

enum class PipeSchedule { gpipe, one_f_one_b, interleaved_1f1b, zero_bubble };
const char* pipe_schedule_name(PipeSchedule s);
// nullptr name -> false.
bool parse_pipe_schedule(const std::string& name, PipeSchedule* out);

enum class PipeOp {
  forward,
  backward,         // the whole backward: input and weight gradients
  backward_input,   // zero bubble: the input gradient (what the previous stage waits for)
  backward_weight,  // zero bubble: the weight gradient (what nothing waits for but the update)
};
const char* pipe_op_name(PipeOp op);

struct PipeAction {
  PipeOp op;
  int micro_batch;
  int stage;  // 0 .. ranks * virtual_stages - 1
  bool operator==(const PipeAction&) const = default;
};

struct PipeShape {
  int ranks = 1;           // P: pipeline ranks
  int virtual_stages = 1;  // V: stages per rank
  int micro_batches = 1;   // M
  int stages() const { return ranks * virtual_stages; }
};

class PipelineSchedule {
 public:
  // Refuses (exit 2, naming the key) a shape the schedule cannot run: V != 1 for gpipe, 1f1b
  // and zero_bubble, V < 2 or M not a multiple of P for interleaved_1f1b, M < 1 or P < 1.
  PipelineSchedule(PipeSchedule kind, PipeShape shape);

  PipeSchedule kind() const { return kind_; }
  const PipeShape& shape() const { return shape_; }
  int rank_of_stage(int stage) const { return stage % shape_.ranks; }
  const std::vector<PipeAction>& actions(int rank) const { return actions_[size_t(rank)]; }
  // The bubble's share of a step in theory, with a micro-batch's forward, input-gradient and
  // weight-gradient times f, b and w on every stage (1F1B: (P-1)/(M+P-1) whatever they are).
  double theoretical_bubble(double f, double b, double w) const;
  // One line: "1f1b over 4 ranks, 8 micro-batches: bubble 27.3% in theory".
  std::string describe() const;

 private:
  PipeSchedule kind_;
  PipeShape shape_;
  std::vector<std::vector<PipeAction>> actions_;  // per rank
};

// Replays every rank's list with time: each action starts when its rank has finished the one
// before it and its inputs have arrived (a forward: the previous stage's forward of that
// micro-batch plus `transfer`; a backward or input gradient: the next stage's, plus `transfer`,
// and this stage's forward; a weight gradient: this stage's input gradient). Fails (naming the
// rank and action) when the lists deadlock or miss an action.
struct PipeCosts {
  double forward = 1, backward_input = 1, backward_weight = 1;  // per stage and micro-batch
  double transfer = 0;                                          // between stages on different ranks
};
struct PipeTimeline {
  double makespan = 0;
  std::vector<double> busy;        // per rank: the time it computed
  std::vector<int> peak_inflight;  // per rank: micro-batches forwarded, not yet backwarded
  double bubble() const;           // 1 - mean busy / makespan
};
PipeTimeline simulate_pipeline(const PipelineSchedule& schedule, const PipeCosts& costs);

}  // namespace st

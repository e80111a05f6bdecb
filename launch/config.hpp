#pragma once
// The configuration of a run: TOML file + `section.key=value` overrides, validated up front.
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "collectives/mpi_algorithm.hpp"
#include "collectives/process_group.hpp"
#include "core/data/dataset.hpp"
#include "core/dtype.hpp"
#include "core/ops/matmul_path.hpp"
#include "models/family.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "parallel/device_mesh.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"
#include "parallel/pipeline/schedule.hpp"

namespace st {

// metrics.trace_steps, parsed once: 1-based step numbers FIRST..LAST, inclusive ("": every step).
struct StepRange {
  int64_t first = 1, last = INT64_MAX;
  StepRange() = default;
  // "FIRST..LAST" or ""; an InputError naming metrics.trace_steps otherwise.
  StepRange(std::string_view text);  // NOLINT: a config word converts implicitly
  StepRange(const char* text) : StepRange(std::string_view(text)) {}  // NOLINT
  bool contains(int64_t step_number) const { return step_number >= first && step_number <= last; }
  std::string name() const;  // the config's text: "" or "FIRST..LAST"
};

// checkpoint.resume, parsed once: the newest complete checkpoint under checkpoint.dir ("auto"),
// none ("never"), or the checkpoint directory given.
struct ResumeFrom {
  struct Newest {};
  struct Never {};
  std::variant<Newest, Never, std::string> choice;

  ResumeFrom() = default;
  // "auto", "never", else a path; an InputError naming checkpoint.resume for "".
  ResumeFrom(std::string_view word);  // NOLINT: a config word converts implicitly
  ResumeFrom(const char* word) : ResumeFrom(std::string_view(word)) {}  // NOLINT
  bool newest() const { return std::holds_alternative<Newest>(choice); }
  bool never() const { return std::holds_alternative<Never>(choice); }
  const std::string* path() const { return std::get_if<std::string>(&choice); }
  std::string name() const;  // the config's word: auto, never or the path
  friend bool operator==(const ResumeFrom& r, std::string_view word) { return r.name() == word; }
};
inline ResumeFrom::ResumeFrom(std::string_view word) {
  if (word == "auto")
    choice = Newest{};
  else if (word == "never")
    choice = Never{};
  else
    choice = std::string(word);
}

struct Config {
  ModelConfig model;
  DataSource data;  // path or tokens; neither: the built-in corpus
  struct {
    int64_t max_steps = 200;
    int64_t global_batch = 8;
    int64_t micro_batches = 1;
    int64_t seq_len = 256;
    int64_t seed = 1337;
    double grad_clip = 1.0;
    int64_t threads = 0;  // 0: cores / ranks on this node
    std::string init_from;
    double stall_timeout = 30;    // s a rank may be silent or stuck before the job ends; 0: off
    double startup_timeout = 40;  // s for MPI's start-up and the first agreement; 0: none
    int64_t eval_every = 0;       // validate every this many steps; 0: only after the last
    int64_t eval_tokens = 0;      // tokens each of those scores; 0: the final validation's
  } training;
  OptimizerConfig optimizer;
  struct {
    double lr = 1e-3;
    int64_t warmup_steps = 0;
    double min_lr = 1e-4;
    ScheduleKind kind = ScheduleKind::cosine;
    double decay_fraction = 0.1;                  // wsd: the last fraction of max_steps
    DecayShape decay_shape = DecayShape::linear;  // wsd
  } schedule;  // [optimizer] lr, warmup_steps, min_lr, schedule, decay_fraction, decay_shape
  struct {
    DType param_dtype = DType::bf16;
    DType reduce_dtype = DType::f32;
    DType output_dtype = DType::f32;
    Bf16MatmulPath bf16_matmul = Bf16MatmulPath::automatic;
    Fp32MatmulEngine fp32_matmul = Fp32MatmulEngine::automatic;
  } precision;
  struct {
    bool reshard_after_forward = true;
    int64_t reshard_to = 0;  // reshard_after_forward = N: a 1/N slice kept for the backward (hpZ)
    Quantization gather_quantization = Quantization::none;  // all-gathers across nodes (qwZ)
    Quantization reduce_quantization = Quantization::none;  // reductions across nodes (qgZ)
    int64_t prefetch = 1;
    Accumulation accumulation = Accumulation::reduce_each;
    Algorithm collective_algorithm = Algorithm::automatic;
    bool symmetric_memory = true;  // FSDP's and TP's buffers where collectives read them in place
    ReplicaSync replica_sync = ReplicaSync::each;
    int64_t ranks_per_node = 0;  // 0: detect (ranks sharing memory)
    bool allow_cross_node_shard = false;
    ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::none;
  } sharding;
  // [parallel]: the device mesh (parallel/mesh_layout.hpp); the product of the four is the world
  // size, one of them -1 for the rest.
  struct {
    int64_t dp_shard = -1;     // ranks sharing one copy of the parameters (FSDP)
    int64_t dp_replicate = 1;  // copies that all-reduce their gradient shards (HSDP, DDP)
    int64_t tp = 1;            // tensor-parallel ranks (consecutive: the innermost dimension)
    int64_t pp = 1;            // pipeline ranks (the outermost dimension)
    PipeSchedule pp_schedule = PipeSchedule::one_f_one_b;
    int64_t pp_virtual_stages = 1;         // stages per pipeline rank
    std::vector<int> pp_layers;            // blocks per stage; empty: balanced
    DType pp_boundary_dtype = DType::f32;  // what the residual stream crosses stages in
    bool allow_cross_node_tp = false;
    // With tp > 1: norms and residual adds on this rank's rows of the micro-batch (Megatron's
    // sequence parallelism).
    bool sequence_parallel = true;
  } parallel;
  // Keys read under an older name, each "old -> new" (printed once at start-up).
  std::vector<std::string> renamed_keys;
  struct {
    std::string dir;
    int64_t every = 0;
    int64_t keep = 2;
    ResumeFrom resume;
    bool async = false;          // write in the background while training goes on
    double async_timeout = 300;  // s a background save may take before it is given up
  } checkpoint;
  struct {
    std::string file;
    std::string trace;
    StepRange trace_steps;
    int64_t log_every = 1;  // print the step line every this many steps
  } metrics;
};

// Names of the bundled configs (launch/configs/NAME.toml, compiled into the binary).
std::vector<std::string> bundled_config_names();

// Loads `source` (a path, or the name of a bundled config; empty: "tiny"), then applies
// overrides. Unknown keys, wrong types and bad values are InputErrors naming the key.
Config load_config(const std::string& source, const std::vector<std::string>& overrides);
// load_config's work once the TOML text is read (`where` names it in errors); the fuzz target
// calls it with arbitrary bytes.
Config parse_config(std::string_view text, const std::string& where,
                    const std::vector<std::string>& overrides);
// One section.key=value item set on `config` (not validated).
void apply_override(Config& config, const std::string& item);

// Range and consistency checks of everything that does not depend on the world size: run once
// where a config is read (load_config), and again only where a config is changed.
void validate_config(const Config& config);
// The checks that need the world size: global_batch splits over the ranks, the mesh's product is
// the world, whole nodes. Run once by the trainer, where the world is known; by `simulate` and
// the restart planner for each world they consider.
void validate_for_world(const Config& config, int world_size);
// The [model] section's part of it (also for shapes read from checkpoints and config.json).
void validate_model_config(const ModelConfig& model);

// [parallel]'s dp_shard x dp_replicate x tp x pp resolved for `world_size` ranks (-1: the
// rest); an InputError naming the keys when they do not multiply to the world size.
MeshShape mesh_shape(const Config& config, int world_size);
// The rows of one micro-batch each data-parallel place of `mesh` reads (the ranks of a TP group
// read the same rows): training.global_batch / micro_batches / (dp_replicate x dp_shard).
int64_t rows_per_data_rank(const Config& config, const MeshShape& mesh);
// Pipeline parallelism over `pp` > 1 ranks checked against the model's blocks and the
// micro-batches (the schedule's needs, parallel.pp_layers) and against what it does not compose
// with yet; tensor parallelism over `tp` ranks against the model (its family's plan: what TP
// splits divides by tp); each refused by key. `tp` and `pp` are the config's (-1: checked again
// once the world resolves them) or the resolved mesh's.
void check_parallelism_supported(const Config& config, int64_t tp, int64_t pp);

// Every key as `section.key = value`, for the start-up summary.
std::vector<std::string> describe_config(const Config& config);

// All valid keys ("section.key"), and the closest one to `key` (empty when none is close).
std::vector<std::string> config_keys();
// The reference of every key (section, type, the default job's value, allowed values, meaning):
// aligned text, or the Markdown page committed as docs/config.md (tests compare the two).
std::string config_reference(bool markdown);
std::string closest_key(const std::string& key);

}  // namespace st

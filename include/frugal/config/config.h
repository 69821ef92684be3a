// The typed configuration: one struct per YAML section (docs/config.md is the schema).
// Defaults here are the documented defaults; load_config() fills these from YAML, applies
// `extends:` and `--set` overrides, and validates. Names are part of the public contract:
// keep them stable.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace frugal {

struct RunConfig {
  std::string name = "run";
  std::string dir = "runs";      // the run directory is <dir>/<name>
  uint64_t seed = 1337;
  std::string resume = "never";  // never | auto | PATH (a checkpoint directory)
  bool overwrite = false;        // replace an existing run directory (never implied)
  int64_t threads = 0;           // intra-op threads; 0 = torch's default
  std::string device = "auto";   // auto | cpu | cuda | cuda:N (auto: CUDA when present)
};

// model.lora: low-rank adapters on the named linear layers, the rest frozen
// (frugal/models/lora.h, docs/finetuning.md); rank 0 = off.
struct LoraConfig {
  int64_t rank = 0;
  double alpha = 16.0;
  double dropout = 0.0;
  // Linear layers by name (a name matches the layer's dotted name or its last parts), or
  // [all-linear]; empty = the model type's attention projections (llama: q_proj, v_proj; gpt:
  // qkv).
  std::vector<std::string> targets;
  bool rslora = false;  // scale alpha / sqrt(rank) instead of alpha / rank
};

// model.quantize_base: the frozen base weights of linear layers stored in 4 bits.
struct QuantizeConfig {
  std::string type = "none";  // none | nf4
  // The layers quantized; empty = the LoRA targets. [all-linear] = every linear layer but the
  // output head.
  std::vector<std::string> modules;
};

struct ModelConfig {
  std::string type = "gpt";  // gpt | llama | mlp | convnet | a user-registered name
  // A preset of the chosen type (gpt: gpt-tiny | ... | gpt2-124m; llama: smollm2-135m | ... |
  // llama-3.1-8b | qwen2.5-0.5b); it fills the sizes, keys given explicitly win over it.
  std::string size;
  // gpt and llama
  int64_t vocab_size = 256;
  int64_t block_size = 128;  // maximum sequence length
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  double dropout = 0.0;
  bool bias = true;
  // Kernels of attention: auto (frugal's CPU kernel where it applies, else ATen's)
  // | aten | frugal; see frugal/models/kernels.h.
  std::string kernels = "auto";
  // gpt / llama: compute the output projection and the loss this many tokens at a time, so
  // the whole logits never exist (models/chunked_loss.h); 0 = off.
  int64_t loss_chunk_tokens = 0;
  // llama: a Hugging Face model folder to start from (config.json sets the architecture keys
  // above and below; the weights are loaded before training; docs/models.md).
  std::string init_from;
  // llama (Llama 2/3, SmolLM2, Qwen2, Mistral shapes; n_embd is the hidden size)
  int64_t n_kv_head = 0;          // key/value heads (grouped-query attention); 0 = n_head
  int64_t intermediate_size = 0;  // SwiGLU's hidden size; 0 = 8/3 n_embd rounded up to 256
  double rope_theta = 10000.0;    // rotary embeddings' base
  std::string rope_scaling = "none";  // none | llama3 (Llama 3.1's long-context frequencies)
  double rope_factor = 8.0;           // llama3 scaling: factor, low/high frequency factors and
  double rope_low_freq_factor = 1.0;  // the context length the model was first trained at
  double rope_high_freq_factor = 4.0;
  int64_t rope_original_max_position = 8192;
  double rms_norm_eps = 1e-5;
  bool tie_embeddings = true;  // the output projection is the token embedding
  bool qkv_bias = false;       // biases on the q, k and v projections (Qwen2)
  // mlp
  int64_t in_features = 32;
  std::vector<int64_t> hidden = {64, 64};
  int64_t out_features = 10;
  // convnet
  int64_t in_channels = 1;
  int64_t image_size = 28;
  std::vector<int64_t> channels = {16, 32};
  int64_t num_classes = 10;
  // Free-form settings for user-registered model types (model.options: {key: value}).
  std::map<std::string, std::string> options;
  // Fine-tuning: adapters, parameters frozen by name (shell wildcards, e.g. "embed_tokens.*"),
  // the frozen base in 4 bits, and a PEFT adapter folder to start the adapters from.
  LoraConfig lora;
  std::vector<std::string> freeze;
  // How frozen linear weights are stored: auto = in autocast's dtype under a mixed precision
  // (every use of them is autocast's copy in that dtype anyway: the same numbers in half the
  // bytes), else as built; fp32 = as built.
  std::string frozen_dtype = "auto";
  QuantizeConfig quantize_base;
  std::string init_adapter;
};

struct DataConfig {
  std::string type = "synthetic";  // tokens | idx | synthetic | text
  std::string path;                // tokens: .bin shard or folder of shards; idx: images
                                   // file; text: a text file or a folder of text files
  std::string labels_path;         // idx: labels file
  std::string val_path;            // optional held-out data; else val_fraction of path
  double val_fraction = 0.05;
  std::string token_format = "auto";  // auto | nanogpt (raw uint16) | llmc (256 x int32 header)
  int64_t micro_batch_size = 8;
  int64_t seq_len = 0;  // tokens per sample; 0 = model.block_size
  int64_t num_workers = 1;
  bool pin_memory = false;
  bool shuffle = true;
  int64_t synthetic_samples = 4096;  // synthetic: how many samples in the training split
  // tokens: the end-of-text token that closes each document (prepare-text's); set, samples
  // carry position ids that restart after it, and attention stays within documents (llama).
  // -1 = the shard's meta file's end of text for a llama, else off (attention spans the
  // whole window).
  int64_t eot_token = -1;
  // tokens, text: with a model.init_from folder that has a tokenizer, data made by another
  // tokenizer (a shard's meta file says which; text is bytes) is refused unless this is set.
  bool allow_tokenizer_mismatch = false;
  // Instruction data (chat: JSONL conversations; tokenized: JSONL input_ids / labels), see
  // docs/finetuning.md. chat: the template (auto = the one the tokenizer folder's
  // tokenizer_config.json holds), the tokenizer (a folder; empty = model.init_from), which
  // tokens are learned (assistant | all | last: the last assistant turn).
  std::string chat_format = "auto";
  std::string tokenizer;
  std::string train_on = "assistant";
  // chat and tokenized: samples packed best-fit-decreasing into seq_len rows with position
  // ids per document (llama), else one sample a row, a batch padded to its longest; a sample
  // longer than seq_len + 1 tokens is cut (right: its end goes, left: its start) or refused.
  bool packing = false;
  std::string truncate = "right";
  // chat and tokenized: > 0 caps a micro-batch by positions (rows x its longest row, padding
  // included) instead of by samples alone: rows of like length are grouped into batches of at
  // most this many positions and at most micro_batch_size rows.
  int64_t max_tokens_per_batch = 0;
  // chat and tokenized: a sample with nothing to learn (no assistant turn under train_on
  // assistant, or cut away): skip (dropped and counted in the log) | error (refused, file:line).
  std::string no_target = "skip";
};

struct OptimConfig {
  std::string type = "adamw";  // adamw | adam | sgd | adamw8bit | adafactor
  double lr = 3e-4;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;  // sgd
  bool nesterov = false;  // sgd
  double clip_grad_norm = 0.0;  // 0 = off
  // adamw8bit: values per quantization block of m and v (one fp32 absmax each); a power of
  // two in [64, 4096]. 256: 2.03 bytes of state per parameter.
  int64_t quant_block = 256;
  // adafactor: step size lr * max(1e-3, RMS(parameter)) (the paper's); false: lr alone.
  bool scale_parameter = true;
  // adafactor: the first moment's decay (transformers' beta1), 4 more bytes per parameter;
  // 0 = none, only the factored second moment.
  double beta1 = 0.0;
  // Step each parameter, and free its gradient, as soon as the gradient is final
  // (strategy/in_backward_update.h): no clipping, no fp16-mixed, no offload.optimizer.
  bool in_backward = false;
};

struct ScheduleConfig {
  std::string type = "constant";  // constant | cosine | linear | step
  int64_t warmup_steps = 0;
  double min_lr = 0.0;     // cosine / linear: the floor reached at the end of decay
  int64_t decay_steps = 0; // cosine / linear: steps of decay after warmup; 0 = until max_steps
  int64_t step_size = 1000;  // step: multiply lr by gamma every step_size steps
  double gamma = 0.1;
};

// train.profile: LibTorch's profiler (Kineto) over `steps` optimizer steps from `start_step`,
// written as a Chrome trace (RUN_DIR/profile/trace[.rank<r>].json) with frugal's ranges
// (util/trace.h) around ATen's operators.
struct ProfileConfig {
  int64_t start_step = 0;  // the first profiled step (1-based); 0 = no profile
  int64_t steps = 3;
  bool memory = false;     // allocations and frees as the trace's memory events
  bool shapes = false;     // operators' input shapes (more overhead)
};

struct TrainConfig {
  int64_t max_steps = 1000;
  int64_t eval_every = 0;    // 0 = no periodic eval
  int64_t eval_batches = 10;
  int64_t log_every = 10;
  int64_t checkpoint_every = 0;  // 0 = only at the end
  int64_t keep_last = 3;
  // A checkpoint at the end of the run (when the last step has none): off for runs whose state
  // nobody resumes or exports (benchmarks, the GPU check), where writing it would cost the most.
  bool save_final = true;
  // Checkpoints written by a background thread while training goes on: the state is copied to
  // host memory at the save (counted against memory.budget), then written and published with
  // the same files, hashes and atomic rename; at most one save in flight.
  bool checkpoint_async = false;
  std::string progress = "auto";  // auto (bar on a terminal, lines otherwise) | bar | lines | none
  bool metrics_per_rank = false;  // multi-process: every rank also writes metrics.rank<N>.jsonl
  // FLOP/s of one rank's device, for MFU in the progress line and metrics.jsonl; 0 = the
  // bf16 peak of a known GPU, else no MFU (train/throughput.h).
  double peak_flops = 0.0;
  // Per-phase step times in metrics.jsonl (time_forward_s, ...): two clock reads per phase.
  bool phase_timing = true;
  // A step whose loss or gradients are not finite: skip (its update; the run goes on) | halt
  // (fp16's overflow skips excepted); either stops after max_nonfinite_steps bad steps in a row
  // (train/nonfinite_guard.h).
  std::string on_nonfinite = "skip";
  int64_t max_nonfinite_steps = 20;
  // TensorBoard event files under RUN_DIR/tensorboard (train/tensorboard.h): every number of
  // metrics.jsonl's records as a scalar of the same tag, the resolved config as text.
  bool tensorboard = false;
  // main: rank 0 writes the job's figures (metrics.jsonl's); all: every rank writes its own,
  // in tensorboard/rank<N>/ (TensorBoard shows a folder as one run).
  std::string tensorboard_ranks = "main";
  // Every N steps, per module: a histogram of the parameters, the parameters' norm and the
  // gradients' norm; 0 = none.
  int64_t tensorboard_histograms_every = 0;
  ProfileConfig profile;
};

// Text sampled from a language model at the end of training.
struct GenerateConfig {
  int64_t tokens = 0;  // 0 = don't sample
  double temperature = 0.8;
  int64_t top_k = 0;  // 0 = full distribution
  std::string prompt = "\n";
  // A tokenizer.json / SentencePiece .model (or its folder) to encode the prompt and decode the
  // sample; empty = model.init_from's, else bytes (vocab_size 256).
  std::string tokenizer;
};

// fp16-mixed's dynamic loss scaling (torch.amp.GradScaler's options and defaults); also the
// C++ GradScaler's options (frugal/strategy/grad_scaler.h).
struct GradScalerConfig {
  bool enabled = true;  // only used by fp16-mixed
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// Activation checkpointing: which blocks drop their activations after forward and recompute
// them in backward.
// A memory size: bytes, or a share of the device's memory (0 < fraction <= 1).
struct MemoryAmount {
  int64_t bytes = 0;
  double fraction = 0.0;
  bool empty() const { return bytes == 0 && fraction == 0.0; }
};

struct CheckpointingConfig {
  // none | full | every_k | selective | auto (the cheapest of none, selective, every_k, full,
  // full + activation offload whose predicted peak fits memory_budget: memory/auto_policy.h)
  std::string policy = "none";
  int64_t k = 2;                // every_k: blocks 0, k, 2k, ...
  std::vector<std::string> targets = {"attn"};  // selective: sub-blocks by name (attn, mlp)
  // auto: the peak to stay under; empty = memory.budget (CPU) or the device's memory (CUDA).
  MemoryAmount memory_budget;
};

// How the training state is spread over the ranks of a multi-process job.
struct ShardingConfig {
  // none | ddp | zero1 | zero2 | zero3 | hsdp | a user-registered name
  // (frugal::register_sharding)
  std::string mode = "none";
  double bucket_mb = 25.0;  // ddp: gradient bucket size
  // zero*: how parameters are grouped into units (one flat, sharded buffer per unit):
  // block = one unit per block of the model's block lists; size = consecutive blocks merged
  // until a unit holds at least unit_mb MiB. Everything else forms the root unit.
  std::string wrap = "block";
  double unit_mb = 25.0;
  std::string param_dtype = "auto";   // zero*: dtype of the gathered parameters (auto = as built)
  std::string reduce_dtype = "auto";  // zero*: dtype gradients are reduced in (auto = param_dtype)
  int64_t prefetch = 1;               // zero3: units gathered ahead of the one computing
  // zero2/zero3 with accumulation: reduce-scatter every micro-step and keep gradients sharded
  // (least memory), or keep them whole until the last micro-step (least traffic).
  bool accumulate_sharded = true;
  // hsdp: ranks per shard group (zero3 within a group, replicated across groups); 0: the
  // ranks of one node (LOCAL_WORLD_SIZE).
  int64_t shard_size = 0;
};

// Where strategy.offload.optimizer keeps the fp32 master weights and the optimizer state the
// host step updates: nowhere (no offload, YAML false), host memory (ram, YAML true), or files
// on a fast local disk streamed through a bounded ring of host buffers (nvme,
// strategy/nvme_offload.h). Converts from bool, so `offload.optimizer = true` still reads.
struct OptimizerPlace {
  enum Where { none, ram, nvme };
  Where where = none;
  OptimizerPlace() = default;
  OptimizerPlace(bool on) : where(on ? ram : none) {}  // NOLINT: implicit on purpose
  OptimizerPlace(Where w) : where(w) {}                // NOLINT
  explicit operator bool() const { return where != none; }
  bool operator==(const OptimizerPlace& o) const { return where == o.where; }
  bool operator!=(const OptimizerPlace& o) const { return where != o.where; }
};

// Model state in host memory (ZeRO-Offload), or past it on disk (ZeRO-Infinity).
struct OffloadConfig {
  OptimizerPlace optimizer;  // fp32 master weights and optimizer state off the device; host step
  std::string nvme_path;     // optimizer: nvme: the directory its (scratch) state files go in
  double buffer_mb = 64.0;   // optimizer: nvme: the ring of host buffers the state streams through
  // optimizer: nvme on a filesystem that refuses O_DIRECT: an error (true), or a warning and
  // cached I/O (false).
  bool nvme_require_direct = false;
  bool params = false;     // zero3: the parameter shards themselves on the host
  // Activations backward needs, in host memory until backward (strategy/activation_offload.h):
  // checkpointed units' inputs, or without checkpointing what every block saves.
  bool activations = false;
  int64_t activation_prefetch = 1;  // entries brought back ahead of backward
  bool pin_memory = true;  // page-locked host buffers when CUDA is present
};

struct StrategyConfig {
  std::string precision = "fp32";  // fp32 | bf16-mixed | fp16-mixed
  GradScalerConfig grad_scaler;
  int64_t accumulation = 1;  // micro-batches per optimizer step
  CheckpointingConfig checkpointing;
  ShardingConfig sharding;
  OffloadConfig offload;
};

struct MemoryConfig {
  int64_t monitor_every = 0;      // memory figures in metrics every N steps (0 = every logged step)
  int64_t empty_cache_every = 0;  // return cached CUDA blocks every N steps (0 = never)
  int64_t budget = 0;             // bytes (YAML also takes "2GiB", "512MiB"); CPU runs enforce it
  bool record_history = false;    // allocator history: CUDA's for PyTorch's viewer; CPU's as JSON
  std::string host_allocator = "tuned";  // tuned | system (glibc malloc thresholds)
  int64_t history_max_events = 1000000;  // CPU history: the most recent events kept
};

struct DistributedConfig {
  std::string backend = "auto";  // auto | nccl | gloo
  double timeout_s = 300;
  // Before each collective the ranks compare what they are about to run, and fail at once
  // naming both sides when they differ (one more small all_gather per collective).
  bool debug = false;
};

struct Config {
  RunConfig run;
  ModelConfig model;
  DataConfig data;
  OptimConfig optim;
  ScheduleConfig schedule;
  TrainConfig train;
  GenerateConfig generate;
  StrategyConfig strategy;
  MemoryConfig memory;
  DistributedConfig distributed;
  std::string source;  // the file it was loaded from ("" when built in code)
};

}  // namespace frugal

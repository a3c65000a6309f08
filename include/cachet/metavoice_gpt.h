// The two GPT stages of MetaVoice-1B.
//
// Stage 1 (MvStage1) is a gpt-fast causal Transformer: learned absolute positions (no RoPE),
// RMSNorm, SwiGLU, no biases, a speaker projection added to every position of the conditioned
// row. It always runs the classifier-free-guidance batch of two rows: row 0 conditioned on the
// speaker, row 1 unconditioned (nothing added), each with its own KV cache in one State.
//
// Stage 2 (MvStage2) is MetaVoice's nanoGPT: token embeddings of several input hierarchies are
// summed, plus learned positions and a speaker projection; LayerNorm or RMSNorm, GELU (exact erf)
// or SwiGLU MLP, optional biases. The released configuration is non-causal (bidirectional, no
// mask) with six untied target heads; causal configurations (heads tied to the input embeddings)
// also run incrementally with a KV cache held in a State.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cachet/dtype.h"
#include "cachet/model.h"
#include "cachet/model_files.h"

namespace cachet {

class ThreadPool;

// gpt-fast ModelArgs; the defaults are the released MetaVoice-1B stage 1.
struct MvStage1Args {
  int64_t block_size = 2048;  // rows of pos_embeddings: the longest sequence
  int64_t vocab_size = 2562;
  int64_t n_layer = 24;
  int64_t n_head = 16;
  int64_t dim = 2048;
  int64_t n_local_heads = 16;  // key/value heads (-1 in a config means n_head)
  double norm_eps = 1e-5;
  int64_t intermediate_size = 5632;  // absent in a config: find_multiple(int(8 dim / 3), 256)
  int64_t speaker_emb_dim = 256;

  int64_t head_dim() const { return dim / n_head; }

  // Parses {"model_args": {...}} (or a bare {...} of the fields); absent fields keep the
  // released values, except intermediate_size, derived from dim when absent. Unknown fields
  // are ignored. Checks the values; errors name `where` and the field.
  static MvStage1Args from_json(const nlohmann::json& j, const std::string& where);
  // {"model_args": {...}} with every field (round-trips through from_json).
  nlohmann::json to_json() const;
};

// MetaVoice nanoGPT GPTConfig; the defaults are the released MetaVoice-1B stage 2.
struct MvStage2Args {
  int64_t block_size = 1024;
  std::vector<int64_t> vocab_sizes = {1538, 1025};  // one per input hierarchy
  // Output heads (untied; requires causal == false). Empty: one head per input hierarchy,
  // tied to its embedding (requires causal == true).
  std::vector<int64_t> target_vocab_sizes = {1025, 1025, 1025, 1025, 1025, 1025};
  int64_t n_layer = 6;
  int64_t n_head = 6;
  int64_t n_embd = 384;
  bool bias = false;  // biases in every Linear and LayerNorm
  bool causal = false;
  std::string norm_type = "layernorm";  // "layernorm" (eps 1e-5) | "rmsnorm"
  double rmsnorm_eps = 0;               // rmsnorm only, where it must be set (> 0); 0 / null: unset
  std::string nonlinearity_type = "gelu";  // "gelu" (exact erf) | "swiglu"
  int64_t swiglu_multiple_of = 0;  // swiglu only, where it must be set (> 0); 0 / null: unset
  bool spk_emb_on_text = true;     // false (causal only): no speaker term before the end of text
  bool kv_cache_enabled = false;   // accepted for causal models; rejected for non-causal ones
  // Not a GPTConfig field (the original passes it to GPT() apart): the speaker embedding size.
  int64_t speaker_emb_dim = 256;

  int64_t head_dim() const { return n_embd / n_head; }
  // MLP hidden width: 4 n_embd for gelu; for swiglu, int(2 * 4 n_embd / 3) rounded up to a
  // multiple of swiglu_multiple_of (tensors mlp.swiglu.w1, mlp.swiglu.w3, mlp.c_proj).
  int64_t mlp_hidden() const;
  // The vocabulary of each output head.
  std::vector<int64_t> head_vocab_sizes() const;

  static MvStage2Args from_json(const nlohmann::json& j, const std::string& where);
  nlohmann::json to_json() const;
};

// End-of-text id of the stage-2 text hierarchy (used by spk_emb_on_text == false).
inline constexpr int32_t kMvStage2EndOfText = 1537;

// forward() of one MvStage1 / MvStage2 object must not run on several threads at once (it uses
// the object's scratch memory); states are independent values.
class MvStage1 {
 public:
  // Builds the stage over gpt-fast-named tensors (safetensors or GGUF, any weight type; names
  // may carry an "_orig_mod." prefix). pool: nullptr means default_pool().
  MvStage1(ModelFiles files, const MvStage1Args& args, ThreadPool* pool = nullptr);
  ~MvStage1();
  MvStage1(const MvStage1&) = delete;
  MvStage1& operator=(const MvStage1&) = delete;

  const MvStage1Args& args() const;
  // arch "metavoice_stage1"; vocab_size; max_positions = block_size; fingerprint;
  // weight_bytes = bytes of weights read per step (both rows together).
  const ModelInfo& info() const;

  // A state holding the KV caches of both guidance rows and the position.
  State new_state() const;
  // Loads a state written by State::save; errors if damaged or from another model.
  State load_state(const std::string& path) const;

  // Advances both rows by T = tokens_row0.size() tokens (tokens_row1 the same length) as one
  // batch. spk_emb: speaker_emb_dim floats, projected and added to every position of row 0
  // (nullptr: no speaker term). logits: [2][T][vocab] when all_positions, else [2][vocab] for
  // the last position. Prefill, single steps and any chunking give the same logits. Errors
  // (state unchanged): empty or mismatched rows, token out of range, exceeding block_size,
  // a state of another model.
  void forward(State& state, std::span<const int32_t> tokens_row0,
               std::span<const int32_t> tokens_row1, const float* spk_emb,
               std::vector<float>& logits, bool all_positions = false);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class MvStage2 {
 public:
  // Builds the stage over nanoGPT-named tensors (transformer.wtes.N, transformer.wpe,
  // transformer.h.N.*, transformer.ln_f, lm_heads.N, speaker_cond_pos). A tied causal model may
  // omit lm_heads.N (the embedding is used). Non-causal models with kv_cache_enabled are
  // rejected, as in the original.
  MvStage2(ModelFiles files, const MvStage2Args& args, ThreadPool* pool = nullptr);
  ~MvStage2();
  MvStage2(const MvStage2&) = delete;
  MvStage2& operator=(const MvStage2&) = delete;

  const MvStage2Args& args() const;
  const ModelInfo& info() const;  // arch "metavoice_stage2"
  // Whether the files hold speaker_cond_pos.weight; without it, passing a speaker embedding to
  // forward is an error (pass nullptr).
  bool has_speaker_projection() const;

  // Full forward over T positions (1 <= T <= block_size). tokens: [n_hierarchies][T]
  // (hierarchy-major). spk_emb: speaker_emb_dim floats or nullptr (no speaker term). Causal
  // models apply the causal mask. logits: the heads one after another, head h as [T][vocab_h]
  // (released model: [6][T][1025]).
  void forward(std::span<const int32_t> tokens, int64_t T, const float* spk_emb,
               std::vector<float>& logits);

  // Causal models only: a KV-cache state (one sequence) and incremental forward of T new
  // positions. logits as above over the T new positions when all_positions, else over the last
  // one only ([heads][1][vocab_h]). Prefill plus steps equals the full causal forward.
  State new_state() const;
  State load_state(const std::string& path) const;
  void forward(State& state, std::span<const int32_t> tokens, int64_t T, const float* spk_emb,
               std::vector<float>& logits, bool all_positions = false);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// In-memory gpt-fast-named stage-1 tensors with random values (matrices in `type`, falling back
// to Q8_0 then F32 where rows are not whole blocks; norms F32), for tests and benchmarks.
ModelFiles random_mv_stage1_files(const MvStage1Args& args, DType type, uint64_t seed,
                                  ThreadPool* pool = nullptr);
// The same for stage 2 (f32).
ModelFiles random_mv_stage2_files(const MvStage2Args& args, uint64_t seed);

// METAVOICE_DIR helpers. The stage-1 weight file of a directory: first_stage.safetensors, else
// first_stage_q4k.gguf, else the first first_stage*.gguf by name; "" when none.
std::string mv_stage1_file(const std::string& dir);
// Whether path is a directory holding a stage-1 weight file.
bool is_metavoice_dir(const std::string& path);
// The optional config.json of a directory; without one, the configs a stage-1 GGUF written by
// `cachet convert` carries ("cachet.hf_config"); else {}. Errors when unreadable.
nlohmann::json mv_dir_config(const std::string& dir);
// The same with where it came from, for messages (the config.json path when there is none).
std::pair<nlohmann::json, std::string> mv_dir_config_at(const std::string& dir);
// The stage args of a directory: released values overridden by config.json's
// "first_stage" / "second_stage" entries.
MvStage1Args mv_stage1_args(const std::string& dir);
MvStage2Args mv_stage2_args(const std::string& dir);
// spk_emb.safetensors ("spk_emb", any shape of `dim` elements, e.g. [1, 256]) as f32.
std::vector<float> mv_read_speaker_embedding(const std::string& path, int64_t dim);
// The dim values of a speaker-embedding tensor (F32, F16, BF16 or F64, finite), or an error
// naming path and the tensor.
std::vector<float> mv_speaker_values(const Tensor& t, const std::string& name,
                                     const std::string& path, int64_t dim);

}  // namespace cachet

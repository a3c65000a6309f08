// A language model and its decoding state. The state is a value the user holds: it can be
// forked (copied), reset, saved and loaded; forward() takes any number of tokens and
// prefill, single steps or any chunking give the same logits.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cachet {

class ThreadPool;

struct ModelInfo {
  std::string arch;  // "recurrent_gemma"
  std::string name;  // file or directory it came from
  int64_t vocab_size = 0;
  int32_t bos_id = 2, eos_id = 1, pad_id = 0;
  int64_t max_positions = 0;  // 0: unbounded (state size is constant)
  // Hash of the config and of every tensor's name, type, shape and a few bytes of its values
  // (start, middle, end): states of another checkpoint of the same shape are refused too
  uint64_t fingerprint = 0;
  uint64_t weight_bytes = 0;  // bytes of weights read per decoded token
};

class StateImpl;  // defined by each model

// The decoding state of one sequence.
class State {
 public:
  State();  // an empty state (valid() is false)
  explicit State(std::unique_ptr<StateImpl> impl);
  State(const State& other);  // fork: a deep copy
  State& operator=(const State& other);
  State(State&&) noexcept;
  State& operator=(State&&) noexcept;
  ~State();

  bool valid() const { return impl_ != nullptr; }
  int64_t position() const;  // tokens consumed so far
  void reset();              // back to position 0, all caches cleared
  State fork() const { return State(*this); }
  size_t bytes() const;  // memory held by this state
  uint64_t model_fingerprint() const;
  // Versioned file with the model fingerprint and a checksum.
  void save(const std::string& path) const;

  StateImpl* impl() { return impl_.get(); }
  const StateImpl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<StateImpl> impl_;
};

// A model may be used from several threads: its passes take turns (they share scratch memory
// and the model's thread pool), so threads gain nothing from sharing one model but get the same
// logits as alone. States are values: each belongs to one thread at a time.
class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  virtual const ModelInfo& info() const = 0;
  virtual State new_state() const = 0;
  // Loads a state saved by State::save; errors if the file is damaged or from another model.
  virtual State load_state(const std::string& path) const = 0;
  // Advances the state by tokens (at least one). logits receives [T, vocab] floats when
  // all_positions, else [vocab] for the last token. On error the state is unchanged.
  virtual void forward(State& state, std::span<const int32_t> tokens, std::vector<float>& logits,
                       bool all_positions = false) = 0;
  // Advances several states (any positions) by one token each in one batched pass;
  // logits receives [states.size(), vocab].
  virtual void forward_batch(std::span<State* const> states, std::span<const int32_t> tokens,
                             std::vector<float>& logits) = 0;
};

struct LoadOptions {
  ThreadPool* pool = nullptr;  // nullptr: default_pool()
};

// Opens a model from a GGUF file or an HF directory, choosing the architecture from its
// config or metadata.
std::unique_ptr<LanguageModel> load_model(const std::string& path, const LoadOptions& opts = {});

}  // namespace cachet

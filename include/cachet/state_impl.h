// The model-specific side of cachet::State. Each model defines a StateImpl subclass holding
// its caches; State wraps it as a value (copy = fork).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace cachet {

class StateImpl {
 public:
  virtual ~StateImpl() = default;
  // A deep copy.
  virtual std::unique_ptr<StateImpl> clone() const = 0;
  // Tokens consumed so far.
  virtual int64_t position() const = 0;
  // Back to position 0 with every cache cleared (the same as a fresh state).
  virtual void reset() = 0;
  // Memory held by the state.
  virtual size_t bytes() const = 0;
  // Fingerprint of the model the state belongs to.
  virtual uint64_t model_fingerprint() const = 0;
  // Writes the state to a file (see cachet/state_file.h).
  virtual void save(const std::string& path) const = 0;
};

}  // namespace cachet

// cachet::State: a value wrapper over a model's StateImpl.
#include "cachet/error.h"
#include "cachet/model.h"
#include "cachet/state_impl.h"

namespace cachet {

namespace {
const StateImpl& need(const std::unique_ptr<StateImpl>& impl) {
  CACHET_CHECK(impl != nullptr, "state: empty state (not created by a model)");
  return *impl;
}
}  // namespace

State::State() = default;
State::State(std::unique_ptr<StateImpl> impl) : impl_(std::move(impl)) {}

State::State(const State& other) : impl_(other.impl_ ? other.impl_->clone() : nullptr) {}

State& State::operator=(const State& other) {
  if (this != &other) impl_ = other.impl_ ? other.impl_->clone() : nullptr;
  return *this;
}

State::State(State&&) noexcept = default;
State& State::operator=(State&&) noexcept = default;
State::~State() = default;

int64_t State::position() const {
  return need(impl_).position();
}

void State::reset() {
  need(impl_);
  impl_->reset();
}

size_t State::bytes() const {
  return impl_ ? impl_->bytes() : 0;
}

uint64_t State::model_fingerprint() const {
  return need(impl_).model_fingerprint();
}

void State::save(const std::string& path) const {
  need(impl_).save(path);
}

}  // namespace cachet

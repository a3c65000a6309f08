// Element-wise op throughput per instruction set, on n = 2560 floats (a hidden vector).
//   bench_ops --benchmark_filter='gelu'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cachet/cpu.h"
#include "cachet/ops.h"

namespace {

constexpr int64_t kN = 2560;

std::vector<float> inputs(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-6.0f, 6.0f);
  std::vector<float> v(kN);
  for (auto& x : v) x = d(rng);
  return v;
}

// Runs op at ISA level range(0) (0 scalar, 1 AVX2, 2 AVX-512); skips levels the CPU lacks.
template <class Fn>
void run(benchmark::State& state, Fn op) {
  const auto isa = static_cast<cachet::Isa>(state.range(0));
  if (isa > cachet::best_isa()) {
    state.SkipWithError("ISA not available on this CPU");
    return;
  }
  const cachet::Isa saved = cachet::active_isa();
  cachet::set_isa(isa);
  auto x = inputs(1), w = inputs(2), y = inputs(3);
  for (auto _ : state) {
    op(x.data(), w.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kN);
  cachet::set_isa(saved);
}

#define CACHET_OP_BENCH(name, expr)               \
  void BM_##name(benchmark::State& state) {       \
    run(state, [](float* x, float* w, float* y) { \
      (void)x, (void)w, (void)y;                  \
      expr;                                       \
    });                                           \
  }                                               \
  BENCHMARK(BM_##name)->DenseRange(0, 2)

CACHET_OP_BENCH(gelu, cachet::ops::gelu(x, y, kN));
CACHET_OP_BENCH(gelu_tanh, cachet::ops::gelu_tanh(x, y, kN));
CACHET_OP_BENCH(silu, cachet::ops::silu(x, y, kN));
CACHET_OP_BENCH(softplus, cachet::ops::softplus(x, y, kN));
CACHET_OP_BENCH(sigmoid, cachet::ops::sigmoid(x, y, kN));
CACHET_OP_BENCH(exp, cachet::ops::exp(x, y, kN));
CACHET_OP_BENCH(rmsnorm, cachet::ops::rmsnorm(x, w, y, kN, 1e-6f, true));
CACHET_OP_BENCH(layernorm, cachet::ops::layernorm(x, w, w, y, kN, 1e-5f));
CACHET_OP_BENCH(softmax, (cachet::ops::softmax(y, kN), y[0] = x[0]));
CACHET_OP_BENCH(dot, y[0] = cachet::ops::dot(x, w, kN));
CACHET_OP_BENCH(axpy, cachet::ops::axpy(0.5f, x, y, kN));
CACHET_OP_BENCH(conv1d_k4, cachet::ops::conv1d_depthwise(w, x, w, nullptr, y, 1, kN / 4, 4));

}  // namespace

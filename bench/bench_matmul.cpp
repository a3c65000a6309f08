// Matrix-matrix product throughput for every weight type: W [rows, cols] times N activation
// rows on a 2-thread pool. Reports GFLOP/s = 2 * rows * cols * N / seconds.
//   bench_matmul --benchmark_filter='Matmul/Q4_K'
// Sizes: MATMUL_ROWS, MATMUL_COLS, MATMUL_N environment variables (default 4096 x 14336, 512).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cachet/cpu.h"
#include "cachet/dtype.h"
#include "cachet/kernels.h"
#include "cachet/quant.h"
#include "cachet/threadpool.h"

using namespace cachet;

namespace {

int64_t env_int(const char* name, int64_t def) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : def;
}

struct Problem {
  int64_t rows, cols, n;
  std::vector<float> x, y;
  std::map<DType, std::vector<uint8_t>> weights;
};

Problem& problem() {
  static Problem p = [] {
    Problem q{env_int("MATMUL_ROWS", 4096),
              env_int("MATMUL_COLS", 14336),
              env_int("MATMUL_N", 512),
              {},
              {},
              {}};
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    q.x.resize(static_cast<size_t>(q.n * q.cols));
    for (auto& v : q.x) v = u(rng);
    q.y.resize(static_cast<size_t>(q.n * q.rows));
    return q;
  }();
  return p;
}

ThreadPool& pool2() {
  static ThreadPool pool(2);
  return pool;
}

const std::vector<uint8_t>& weights(DType t) {
  Problem& p = problem();
  auto it = p.weights.find(t);
  if (it != p.weights.end()) return it->second;
  std::mt19937 rng(2);
  std::normal_distribution<float> g(0.0f, 0.02f);
  std::vector<float> wf(static_cast<size_t>(p.rows * p.cols));
  for (auto& v : wf) v = g(rng);
  std::vector<uint8_t> w(row_bytes(t, p.cols) * static_cast<size_t>(p.rows));
  quantize_matrix(t, wf.data(), w.data(), p.rows, p.cols, &pool2());
  p.weights.clear();  // keep one weight matrix in memory at a time
  return p.weights.emplace(t, std::move(w)).first->second;
}

void bm_matmul(benchmark::State& state, DType t, Isa isa) {
  Problem& p = problem();
  const std::vector<uint8_t>& w = weights(t);
  MatView view{t, p.rows, p.cols, w.data(), row_bytes(t, p.cols)};
  matmul_isa(isa, view, p.x.data(), p.n, p.y.data(), pool2());  // warm-up
  for (auto _ : state) {
    matmul_isa(isa, view, p.x.data(), p.n, p.y.data(), pool2());
    benchmark::DoNotOptimize(p.y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(p.rows * p.cols * p.n) *
                                                     static_cast<double>(state.iterations()) * 1e-9,
                                                 benchmark::Counter::kIsRate);
}

const int kRegistered = [] {
  const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                         DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                         DType::Q4_K, DType::Q5_K, DType::Q6_K};
  for (Isa isa : {Isa::Avx512, Isa::Avx2}) {
    if (isa > best_isa()) continue;
    for (DType t : types) {
      const std::string name =
          "Matmul/" + std::string(dtype_name(t)) + "/" + std::string(isa_name(isa));
      benchmark::RegisterBenchmark(name.c_str(), bm_matmul, t, isa)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->Iterations(3);
    }
  }
  return 0;
}();

}  // namespace

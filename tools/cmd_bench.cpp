// `cachet bench`: model benchmark (bench_model.h) and `cachet bench kernels`: memory bandwidth
// and the matvec / matmul throughput of every weight type at the projection shapes of the
// models (rows x cols).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bandwidth.h"
#include "bench_model.h"
#include "cachet/cpu.h"
#include "cachet/error.h"
#include "cachet/kernels.h"
#include "cachet/quant.h"
#include "cachet/tensor.h"
#include "cachet/threadpool.h"
#include "cli.h"
#include "random_model.h"

namespace cachet::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                           DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                           DType::Q4_K, DType::Q5_K, DType::Q6_K};

struct Shape {
  int64_t rows, cols;
};
const Shape kShapes[] = {{2560, 7680}, {7680, 2560}, {4096, 14336}};
// The most elements one --shapes matrix may have, and the most bytes in any type asked for
// (a matvec figure reads at least two copies).
constexpr int64_t kMaxShapeElems = int64_t{1} << 32;
constexpr size_t kMaxShapeBytes = size_t{4} << 30;

// The copies together: well above the largest last-level cache seen on the kind's hosts (480
// MiB shared, on an Intel host where a 113 MB matrix read again and again ran at 57 GB/s
// against a 36 GB/s probe), and as much as the bandwidth probe reads in one pass.
constexpr size_t kMinWeightBytes = size_t{1} << 30;

struct KernelArgs {
  int threads = 0;
  std::string types;
  bool quick = false;
  bool token = false;
  int64_t rows = 1;
  std::string shapes;
};

// "RxC,RxC,..." (--shapes): each matrix's rows and columns, columns whole blocks of every type
// asked for; the models' projection shapes when empty.
std::vector<Shape> parse_shapes(const std::string& list, const std::vector<DType>& types) {
  if (list.empty()) return {std::begin(kShapes), std::end(kShapes)};
  std::vector<Shape> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    long long r = 0, c = 0;
    char x = 0, extra = 0;
    const int n = std::sscanf(item.c_str(), "%lld%c%lld%c", &r, &x, &c, &extra);
    CACHET_CHECK(n == 3 && (x == 'x' || x == 'X') && r >= 1 && c >= 1, "bench kernels: --shapes: '",
                 item, "' is not ROWSxCOLS (e.g. 6144x2048)");
    CACHET_CHECK(r <= kMaxShapeElems / c, "bench kernels: --shapes: ", item, " has more than ",
                 kMaxShapeElems, " elements");
    for (DType t : types) {
      const int64_t be = dtype_info(t).block_elems;
      CACHET_CHECK(c % be == 0, "bench kernels: --shapes: ", item, ": ", dtype_name(t),
                   " needs columns in whole blocks of ", be);
      CACHET_CHECK(row_bytes(t, c) * static_cast<size_t>(r) <= kMaxShapeBytes,
                   "bench kernels: --shapes: ", item, " in ", dtype_name(t), " is more than ",
                   kMaxShapeBytes >> 30, " GiB");
    }
    out.push_back(Shape{r, c});
  }
  CACHET_CHECK(!out.empty(), "bench kernels: --shapes: no shape given");
  return out;
}

std::vector<DType> parse_types(const std::string& list) {
  std::vector<DType> out;
  if (list.empty()) return {std::begin(kAllTypes), std::end(kAllTypes)};
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.empty()) continue;
    const auto t = dtype_from_name(name);
    CACHET_CHECK(t && is_weight_type(*t) && *t != DType::Q8_K && *t != DType::Q8_1,
                 "bench kernels: --types: unknown or unsupported weight type '", name,
                 "' (Q8_K and Q8_1 are activation formats)");
    out.push_back(*t);
  }
  CACHET_CHECK(!out.empty(), "bench kernels: --types: no type given");
  return out;
}

// A random [rows, cols] matrix of type t (a quantized block of 16 rows, repeated), in the
// layout the models use on this CPU (pack_matrix).
PackedMat make_weight(DType t, Shape s, ThreadPool& pool) {
  const size_t rb = row_bytes(t, s.cols), bytes = rb * static_cast<size_t>(s.rows);
  constexpr int64_t kSeedRows = 16;
  std::vector<float> src(static_cast<size_t>(kSeedRows * s.cols));
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (auto& v : src) v = nd(rng);
  std::vector<uint8_t> seed(rb * kSeedRows);
  quantize_matrix(t, src.data(), seed.data(), kSeedRows, s.cols, &pool);
  auto buf = aligned_buffer(bytes);
  auto* p = static_cast<uint8_t*>(buf.get());
  pool.parallel_for(s.rows, 64, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) std::memcpy(p + rb * r, seed.data() + rb * (r % kSeedRows), rb);
  });
  PackedMat pm = pack_matrix(MatView{t, s.rows, s.cols, p, rb}, &pool);
  if (!pm.buf) pm.buf = std::move(buf);
  return pm;
}

// Copies of make_weight(t, s), as many as needed to exceed kMinWeightBytes together (at least
// two), so that calls rotating over them stream from memory.
std::vector<PackedMat> make_weights(DType t, Shape s, ThreadPool& pool) {
  const size_t bytes = row_bytes(t, s.cols) * static_cast<size_t>(s.rows);
  const size_t copies = std::max<size_t>(2, (kMinWeightBytes + bytes - 1) / bytes);
  std::vector<PackedMat> out;
  for (size_t c = 0; c < copies; ++c) out.push_back(make_weight(t, s, pool));
  return out;
}

// GB/s (weight bytes per second) of matvec calls rotating over the copies, so every call
// streams its matrix from memory: the fastest of several rounds, each of calls one after
// another until at least 1 GiB has been read. The same statistic as the bandwidth probe's (the
// fastest whole pass over 1 GiB), so the two compare like with like.
// With nx > 1 activation rows, each call is a matmul of nx rows (MetaVoice's two guidance rows
// take this path): the weights still stream once per call.
double bench_matvec(DType t, Shape s, const std::vector<PackedMat>& w, ThreadPool& pool, bool quick,
                    int64_t nx) {
  const size_t rb = row_bytes(t, s.cols), bytes = rb * static_cast<size_t>(s.rows);
  std::vector<float> x(static_cast<size_t>(s.cols * nx)), y(static_cast<size_t>(s.rows * nx));
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(rng);
  auto view = [&](size_t i) { return w[i % w.size()].view; };
  auto product = [&](const MatView& v) {
    if (nx == 1)
      matvec(v, x.data(), y.data(), pool);
    else
      matmul(v, x.data(), nx, y.data(), pool);
  };
  product(view(0));  // warm-up (scratch, pool)
  const double budget_s = quick ? 0.25 : 1.0;
  const int min_rounds = 3;
  const size_t calls = std::max<size_t>(1, ((size_t{1} << 30) + bytes - 1) / bytes);
  double best = 0;
  size_t call = 1;
  const auto start = Clock::now();
  for (int round = 0; round < min_rounds || seconds_since(start) < budget_s; ++round) {
    const auto t0 = Clock::now();
    for (size_t c = 0; c < calls; ++c) product(view(call++));
    best = std::max(best, static_cast<double>(bytes * calls) / seconds_since(t0) / 1e9);
  }
  return best;
}

// GFLOP/s of one matmul with n activation rows (best of two when a call is quick); negative
// when matmul is not available.
double bench_matmul(Shape s, const std::vector<PackedMat>& w, int64_t n, ThreadPool& pool) {
  std::vector<float> x(static_cast<size_t>(n * s.cols)), y(static_cast<size_t>(n * s.rows));
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(rng);
  const MatView view = w[0].view;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    try {
      matmul(view, x.data(), n, y.data(), pool);
    } catch (const Error& e) {
      if (std::strstr(e.what(), "not implemented")) return -1;
      throw;
    }
    const double sec = seconds_since(t0);
    best = std::max(best, 2.0 * n * s.rows * s.cols / sec / 1e9);
    if (sec > 1.0) break;
  }
  return best;
}

// The matrices of one RecurrentGemma-2B token (random_model_spec: every projection and the
// tied head, in t where its rows are whole blocks of t) as a decode step reads them, in the
// layouts the model uses.
struct TokenMats {
  std::vector<PackedMat> mats;
  size_t bytes = 0;
  int64_t max_rows = 0, max_cols = 0;
};

TokenMats make_token_mats(DType t, ThreadPool& pool) {
  const RandomModelSpec spec = random_model_spec("recurrentgemma-2b", t);
  TokenMats tm;
  for (const RandomTensor& rt : spec.tensors) {
    if (rt.kind != RandomTensor::Kind::Matrix && rt.kind != RandomTensor::Kind::Embedding) continue;
    const Shape s{rt.shape[0], rt.shape[1]};
    tm.mats.push_back(make_weight(rt.type, s, pool));
    tm.bytes += row_bytes(rt.type, s.cols) * static_cast<size_t>(s.rows);
    tm.max_rows = std::max(tm.max_rows, s.rows);
    tm.max_cols = std::max(tm.max_cols, s.cols);
  }
  return tm;
}

// The mean GB/s over `tokens` tokens of tm's matrices one after another, after one warm-up
// token: what decoding sees.
double bench_token(const TokenMats& tm, ThreadPool& pool, int tokens) {
  std::vector<float> x(static_cast<size_t>(tm.max_cols), 0.5f);
  std::vector<float> y(static_cast<size_t>(tm.max_rows));
  auto token = [&] {
    for (const PackedMat& m : tm.mats) matvec(m.view, x.data(), y.data(), pool);
  };
  token();  // warm-up (first touch of the scratch, the pool)
  const auto t0 = Clock::now();
  for (int i = 0; i < tokens; ++i) token();
  return static_cast<double>(tm.bytes) * tokens / seconds_since(t0) / 1e9;
}

// `LABEL: X GB/s (P% of bandwidth, B GB/s around it)`: B is the higher of the bandwidth probes
// run just before and just after the figure (bandwidth.h).
void print_share(const std::string& label, double gbs, const Probes& p) {
  std::printf("%s: %.1f GB/s (%.0f%% of bandwidth, %.1f GB/s around it)\n", label.c_str(), gbs,
              100.0 * gbs / p.best(), p.best());
  std::fflush(stdout);
}

int run_kernels(const KernelArgs& a) {
  CACHET_CHECK(a.rows >= 1 && a.rows <= 4, "bench kernels: --rows ", a.rows, " (expected 1 to 4)");
  apply_threads(a.threads);
  ThreadPool& pool = default_pool();
  const auto types = parse_types(a.types);
  const auto shapes = parse_shapes(a.shapes, types);
  std::printf("threads: %d, isa: %s\n", pool.size(), std::string(isa_name(active_isa())).c_str());
  std::printf("cpu: %s\n", cpu_summary().c_str());
  print_bandwidth(pool);
  std::printf("matmul path: %s\n", std::string(matmul_path_name(matmul_path())).c_str());
  bool matmul_ok = true;
  char label[128], rows_note[32] = "";
  if (a.rows > 1)
    std::snprintf(rows_note, sizeof rows_note, " (%lld rows)", static_cast<long long>(a.rows));
  for (DType t : types) {
    const std::string tn(dtype_name(t));
    MatLayout layout = MatLayout::Rows;
    for (Shape s : shapes) {
      const auto w = make_weights(t, s, pool);
      layout = w.front().view.layout;
      double gbs = 0;
      const Probes p =
          between_probes(pool, [&] { gbs = bench_matvec(t, s, w, pool, a.quick, a.rows); });
      std::snprintf(label, sizeof label, "matvec %s %lldx%lld%s", tn.c_str(),
                    static_cast<long long>(s.rows), static_cast<long long>(s.cols), rows_note);
      print_share(label, gbs, p);
      if (matmul_ok && a.shapes.empty() && (!a.quick || s.rows == 4096)) {
        constexpr int64_t kN = 512;
        const double gf = bench_matmul(s, w, kN, pool);
        if (gf < 0) {
          matmul_ok = false;
        } else {
          std::printf("matmul %s %lldx%lld N=%lld: %.1f GFLOP/s\n", tn.c_str(),
                      static_cast<long long>(s.rows), static_cast<long long>(s.cols),
                      static_cast<long long>(kN), gf);
          std::fflush(stdout);
        }
      }
    }
    if (layout != MatLayout::Rows) {
      const StreamChoice c = stream_choice(layout, static_cast<int>(a.rows));
      std::printf("stream %s%s: %s (%s)\n", tn.c_str(), rows_note,
                  std::string(stream_way_name(c.way)).c_str(),
                  c.measured ? "the fastest measured" : "not measured");
    }
    if (a.token) {
      const TokenMats tm = make_token_mats(t, pool);
      double gbs = 0;
      const Probes p = between_probes(pool, [&] { gbs = bench_token(tm, pool, a.quick ? 4 : 16); });
      std::snprintf(label, sizeof label, "matvec %s recurrentgemma-2b token (%.2f GiB)", tn.c_str(),
                    static_cast<double>(tm.bytes) / (1 << 30));
      print_share(label, gbs, p);
    }
  }
  return 0;
}

const Register reg{Command{
    "bench", "Benchmark a model (-m / --random) or the kernels (bench kernels)",
    [](CLI::App* sub) -> std::function<int()> {
      auto margs = std::make_shared<BenchModelArgs>();
      sub->add_option("-m,--model", margs->model, "GGUF file or Hugging Face directory");
      sub->add_option("--random", margs->random_name,
                      "Random-weight model preset (recurrentgemma-2b, recurrentgemma-9b, "
                      "recurrentgemma-tiny, metavoice-1b)");
      sub->add_option("--type", margs->type, "Weight type of the random model")
          ->capture_default_str();
      sub->add_option("-p,--prompt", margs->prompt, "Prefill length (default 512; MetaVoice 16)");
      sub->add_option("--long-context", margs->long_context,
                      "Second decode measurement after this many tokens (0: skip)")
          ->capture_default_str();
      sub->add_option("--decode-steps", margs->decode_steps, "Tokens decoded per measurement")
          ->capture_default_str();
      sub->add_option("--tts-seconds", margs->tts_seconds,
                      "MetaVoice: also time the whole text-to-speech pipeline for this much audio")
          ->capture_default_str();
      sub->add_flag("--profile", margs->profile,
                    "Also print where the first decode figure's time goes, phase by phase");
      int* threads = add_threads_option(sub);

      auto kargs = std::make_shared<KernelArgs>();
      CLI::App* k = sub->add_subcommand("kernels", "Memory bandwidth and matvec/matmul throughput");
      k->add_option("-t,--threads", kargs->threads, "Worker threads (default: all cores)");
      k->add_option("--types", kargs->types, "Comma-separated weight types (default: all)");
      k->add_flag("--quick", kargs->quick, "Fewer repetitions");
      k->add_option("--rows", kargs->rows,
                    "Activation rows per matvec (1-4; 2: MetaVoice's two guidance rows)")
          ->capture_default_str();
      k->add_option("--shapes", kargs->shapes,
                    "Comma-separated matrix shapes ROWSxCOLS for the matvecs, e.g. 6144x2048 "
                    "(default: 2560x7680,7680x2560,4096x14336, with matmuls)");
      k->add_flag("--token", kargs->token,
                  "Also the mean over whole tokens of RecurrentGemma-2B's matrices, one after "
                  "another as in decoding");
      return [sub, k, margs, kargs, threads]() -> int {
        if (k->parsed()) {
          if (kargs->threads == 0) kargs->threads = *threads;
          return run_kernels(*kargs);
        }
        CACHET_CHECK(!margs->model.empty() || !margs->random_name.empty(),
                     "bench: give -m MODEL, --random NAME, or the subcommand 'kernels'");
        // Values that would measure nothing are errors, not silently replaced
        CACHET_CHECK(sub->count("-p") == 0 || margs->prompt >= 1, "bench -p ", margs->prompt,
                     ": give a prompt of at least one token");
        CACHET_CHECK(margs->decode_steps >= 2, "bench --decode-steps ", margs->decode_steps,
                     ": give at least 2 (a rate needs two timed steps)");
        CACHET_CHECK(margs->long_context >= 0, "bench --long-context ", margs->long_context,
                     ": give a context length, or 0 to skip the second figure");
        CACHET_CHECK(std::isfinite(margs->tts_seconds) && margs->tts_seconds >= 0 &&
                         margs->tts_seconds <= 3600,
                     "bench --tts-seconds ", margs->tts_seconds,
                     ": give seconds of audio from 0 (off) to 3600");
        CACHET_CHECK(sub->count("--type") == 0 || margs->model.empty(),
                     "bench --type: applies to --random models; a model file keeps the types it "
                     "was written in (cachet quantize writes another)");
        margs->threads = *threads;
        apply_threads(*threads);
        (void)sub;
        return bench_model(*margs);
      };
    }}};

}  // namespace
}  // namespace cachet::cli

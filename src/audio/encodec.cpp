// EnCodec decoder: config, weight loading (weight-norm folding), and the forward pass.
//
// Activations are time-major [L][C]. A convolution becomes one GEMM per block of output rows:
//   Conv1d:          Y[t][o] = sum_{k,c} W[o][k*Cin + c] * xp[t*stride + k*dil][c]
//   ConvTranspose1d: computed polyphase, Y[q][r*Cout + o] = y[q*s + r][o]
//                    = sum_{m,c} W[c][o][r + m*s] * x[q - m][c]  (m < ceil(K/s)),
// so the GEMM output rows are directly the time-major output, s samples per row. The input rows
// a GEMM row needs are gathered (im2col) into a bounded buffer, then cachet::matmul runs with f32
// weights on the pool. Causal decoders run a piece of frames at a time ("Decoding in pieces").
#include "cachet/encodec.h"

#include "cachet/hash.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "cachet/env.h"
#include "cachet/error.h"
#include "cachet/kernels.h"
#include "cachet/model_files.h"
#include "cachet/ops.h"
#include "cachet/quant.h"
#include "cachet/threadpool.h"

namespace cachet {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Weights

namespace {

enum class PadMode { Reflect, Constant, Replicate };

// A float buffer that only grows and is never zero-filled (every element is written first).
// Large buffers are 2 MiB aligned and marked for transparent huge pages: first-touch page faults
// otherwise cost as much as the decode itself on long inputs.
struct Buf {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> p;
  int64_t cap = 0;
  float* get(int64_t n) {
    if (n > cap) {
      constexpr size_t kHuge = size_t{2} << 20;
      size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 16)) * sizeof(float);
      const size_t align = bytes >= 2 * kHuge ? kHuge : 64;
      bytes = (bytes + align - 1) / align * align;
      p.reset(static_cast<float*>(std::aligned_alloc(align, bytes)));
      if (!p) fail("EnCodec: out of memory allocating ", bytes, " bytes");
#ifdef MADV_HUGEPAGE
      if (align == kHuge) madvise(p.get(), bytes, MADV_HUGEPAGE);
#endif
      cap = n;
    }
    return p.get();
  }
  float* data() {
    return p.get();
  }
};

// Activations and scratch of one decode, reused across layers and pieces (and across calls).
struct Work {
  Buf a, b, h1, h2, pad, col, gates;
  Buf frames;  // the layers after the LSTM take their input rows from here
};

// Where the stacked LSTM stands: each layer's h and c, and how many rows it has taken.
struct LstmState {
  std::vector<float> h, c;  // [layers][hidden]
  int64_t rows = 0;
};

struct ConvW {
  int cin = 0, cout = 0, k = 1, dil = 1, stride = 1;
  bool transposed = false;
  int taps = 1;                   // GEMM taps: k (conv) or ceil(k / stride) (transposed)
  std::vector<float> w;           // GEMM weights [rows][taps * cin]; rows = cout or stride * cout
  std::vector<float> b;           // [cout]
  std::vector<float> gn_w, gn_b;  // GroupNorm(1, cout) affine, empty unless time_group_norm
  int64_t rows() const { return transposed ? static_cast<int64_t>(stride) * cout : cout; }
  int64_t cols() const { return static_cast<int64_t>(taps) * cin; }
};

struct LstmW {
  int h = 0;
  std::vector<std::vector<float>> wih, whh, bias;  // per layer: [4h][h], [4h][h], b_ih + b_hh
};

struct ResBlockW {
  std::vector<ConvW> convs;  // each preceded by ELU
  bool conv_shortcut = true;
  ConvW shortcut;
};

struct StageW {
  ConvW up;  // preceded by ELU
  std::vector<ResBlockW> res;
};

// Conv1d weights in PyTorch layout [cout][cin][k] -> GEMM layout [cout][k][cin].
ConvW make_conv(const std::vector<float>& wt, std::vector<float> b, int cin, int cout, int k,
                int dil) {
  ConvW c;
  c.cin = cin;
  c.cout = cout;
  c.k = k;
  c.dil = dil;
  c.taps = k;
  c.w.resize(static_cast<size_t>(cout) * k * cin);
  for (int o = 0; o < cout; ++o)
    for (int i = 0; i < cin; ++i)
      for (int t = 0; t < k; ++t)
        c.w[(static_cast<size_t>(o) * k + t) * cin + i] =
            wt[(static_cast<size_t>(o) * cin + i) * k + t];
  c.b = std::move(b);
  return c;
}

// ConvTranspose1d weights in PyTorch layout [cin][cout][k] -> polyphase GEMM layout
// [s][cout][taps][cin]: row r*cout + o, column mi*cin + c holds W[c][o][r + (taps-1-mi)*s].
ConvW make_convt(const std::vector<float>& wt, std::vector<float> b, int cin, int cout, int k,
                 int s) {
  ConvW c;
  c.cin = cin;
  c.cout = cout;
  c.k = k;
  c.stride = s;
  c.transposed = true;
  c.taps = (k + s - 1) / s;
  const int M = c.taps;
  c.w.assign(static_cast<size_t>(s) * cout * M * cin, 0.0f);
  for (int r = 0; r < s; ++r)
    for (int o = 0; o < cout; ++o)
      for (int mi = 0; mi < M; ++mi) {
        const int kk = r + (M - 1 - mi) * s;
        if (kk >= k) continue;
        float* dst = c.w.data() + ((static_cast<size_t>(r) * cout + o) * M + mi) * cin;
        for (int i = 0; i < cin; ++i) dst[i] = wt[(static_cast<size_t>(i) * cout + o) * k + kk];
      }
  c.b = std::move(b);
  return c;
}

PadMode pad_mode_of(const EncodecConfig& c) {
  if (c.pad_mode == "reflect") return PadMode::Reflect;
  if (c.pad_mode == "constant") return PadMode::Constant;
  if (c.pad_mode == "replicate") return PadMode::Replicate;
  fail("EnCodec: pad_mode '", c.pad_mode, "' is not supported (reflect, constant or replicate)");
}

}  // namespace

struct EncodecDecoder::Impl {
  EncodecConfig cfg;
  PadMode pad_mode = PadMode::Reflect;
  std::mutex work_mu;  // guards work; a concurrent decode uses its own
  Work work;
  std::vector<std::vector<float>> codebooks;  // [codebook_size][codebook_dim] each
  ConvW first;
  LstmW lstm;
  std::vector<StageW> stages;
  ConvW last;
};

namespace {

// Shapes of the decoder, in HF module order; calls the visitor for every module with weights.
// Layer indices follow EncodecDecoder.layers (ELU modules take an index too).
struct Shapes {
  struct ConvSpec {
    std::string prefix;  // "decoder.layers.3" / "decoder.layers.4.block.1" / ".shortcut"
    int cin, cout, k, dil, stride;
    bool transposed;
  };
  std::vector<ConvSpec> convs;  // order: first, (up, res convs..., shortcut)*, last
  int lstm_index = 1;
};

class Loader {
 public:
  Loader(const ModelFiles& f, const EncodecConfig& cfg) : f_(f), cfg_(cfg) {}

  std::vector<float> read(const Tensor& t) const {
    CACHET_CHECK(t.contiguous(), f_.path, ": tensor '", t.name, "' is not contiguous");
    CACHET_CHECK(is_weight_type(t.dtype), f_.path, ": tensor '", t.name, "' has type ",
                 dtype_name(t.dtype), ", which cannot be converted to f32");
    const int64_t n = t.numel();
    std::vector<float> out(static_cast<size_t>(n));
    if (n == 0) return out;
    if (t.ndim() >= 1) {
      const int64_t rows = t.rows(), cols = t.cols();
      const size_t rb = row_bytes(t.dtype, cols);
      for (int64_t r = 0; r < rows; ++r)
        dequantize_row(t.dtype, t.bytes() + r * rb, out.data() + r * cols, cols);
    } else {
      dequantize_row(t.dtype, t.bytes(), out.data(), 1);
    }
    for (float v : out)
      CACHET_CHECK(std::isfinite(v), f_.path, ": tensor '", t.name, "' holds a non-finite value");
    return out;
  }

  const Tensor& get(const std::string& name, const std::vector<int64_t>& shape) const {
    const Tensor& t = f_.get(name);
    check_shape(t, shape);
    return t;
  }

  void check_shape(const Tensor& t, const std::vector<int64_t>& shape) const {
    if (t.shape != shape) {
      Tensor want;
      want.shape = shape;
      fail(f_.path, ": tensor '", t.name, "' has shape ", t.shape_str(), ", expected ",
           want.shape_str());
    }
  }

  // The conv weight of module prefix (".conv" holds the nn.Conv1d / ConvTranspose1d), folding
  // weight norm: W = g * v / ||v||, the norm over every dimension but the first.
  std::vector<float> conv_weight(const std::string& prefix, const std::vector<int64_t>& shape) {
    const std::string base = prefix + ".conv";
    const Tensor* g = f_.find(base + ".weight_g");
    const Tensor* v = f_.find(base + ".weight_v");
    if (!g && !v) {
      g = f_.find(base + ".parametrizations.weight.original0");
      v = f_.find(base + ".parametrizations.weight.original1");
    }
    if (!g && !v) {
      const Tensor* w = f_.find(base + ".weight");
      CACHET_CHECK(w, f_.path, ": missing tensor '", base, ".weight_v' (or '", base,
                   ".weight', or the parametrizations.weight pair)");
      check_shape(*w, shape);
      return read(*w);
    }
    CACHET_CHECK(g && v, f_.path, ": tensor '", base,
                 "': weight norm needs both the g and the v tensor, only one is present");
    check_shape(*v, shape);
    std::vector<int64_t> gshape(shape.size(), 1);
    gshape[0] = shape[0];
    check_shape(*g, gshape);
    std::vector<float> wv = read(*v);
    const std::vector<float> wg = read(*g);
    const size_t per = wv.size() / static_cast<size_t>(shape[0]);
    for (size_t o = 0; o < static_cast<size_t>(shape[0]); ++o) {
      double ss = 0;
      for (size_t i = 0; i < per; ++i) ss += static_cast<double>(wv[o * per + i]) * wv[o * per + i];
      const double norm = std::sqrt(ss);
      CACHET_CHECK(norm > 0, f_.path, ": tensor '", v->name, "': row ", o,
                   " is all zeros, weight norm is undefined");
      const double s = wg[o] / norm;
      for (size_t i = 0; i < per; ++i)
        wv[o * per + i] = static_cast<float>(static_cast<double>(wv[o * per + i]) * s);
    }
    return wv;
  }

  std::vector<float> vec(const std::string& name, int64_t n) { return read(get(name, {n})); }
  void refuse_extra(const std::string& name, const std::string& why) const {
    CACHET_CHECK(!f_.find(name), f_.path, ": tensor '", name, "' is not used: ", why);
  }

  ConvW conv(const std::string& prefix, int cin, int cout, int k, int dil) {
    ConvW c = make_conv(conv_weight(prefix, {cout, cin, k}), vec(prefix + ".conv.bias", cout), cin,
                        cout, k, dil);
    norm(prefix, &c);
    return c;
  }
  ConvW convt(const std::string& prefix, int cin, int cout, int k, int s) {
    ConvW c = make_convt(conv_weight(prefix, {cin, cout, k}), vec(prefix + ".conv.bias", cout), cin,
                         cout, k, s);
    norm(prefix, &c);
    return c;
  }

 private:
  void norm(const std::string& prefix, ConvW* c) {
    if (cfg_.norm_type != "time_group_norm") return;
    c->gn_w = vec(prefix + ".norm.weight", c->cout);
    c->gn_b = vec(prefix + ".norm.bias", c->cout);
  }
  const ModelFiles& f_;
  const EncodecConfig& cfg_;
};

struct Rng {
  uint64_t s;
  uint64_t next() { return splitmix64_next(s); }
  float uniform(float a) {  // [-a, a)
    return a * (2.0f * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f) - 1.0f);
  }
  std::vector<float> vec(size_t n, float a) {
    std::vector<float> v(n);
    for (auto& x : v) x = uniform(a);
    return v;
  }
};

// Visits the decoder's modules in HF order with their names and shapes. Source is Loader (real
// weights) or a random source with the same interface.
template <class Source>
void build(EncodecDecoder::Impl& m, Source& src) {
  const EncodecConfig& c = m.cfg;
  const int n_up = static_cast<int>(c.upsampling_ratios.size());
  int scale = 1 << n_up;
  int idx = 0;
  auto name = [](int i) { return "decoder.layers." + std::to_string(i); };
  m.first = src.conv(name(idx++), c.hidden_size, scale * c.num_filters, c.kernel_size, 1);
  const int h = scale * c.num_filters;
  m.lstm.h = h;
  const std::string lp = name(idx++) + ".lstm.";
  for (int l = 0; l < c.num_lstm_layers; ++l) {
    const std::string sfx = "_l" + std::to_string(l);
    m.lstm.wih.push_back(src.mat(lp + "weight_ih" + sfx, 4 * h, h));
    m.lstm.whh.push_back(src.mat(lp + "weight_hh" + sfx, 4 * h, h));
    std::vector<float> b = src.vec(lp + "bias_ih" + sfx, 4 * h);
    const std::vector<float> b2 = src.vec(lp + "bias_hh" + sfx, 4 * h);
    for (size_t i = 0; i < b.size(); ++i) b[i] += b2[i];
    m.lstm.bias.push_back(std::move(b));
  }
  src.refuse_extra(lp + "weight_ih_l" + std::to_string(c.num_lstm_layers),
                   "the config has num_lstm_layers " + std::to_string(c.num_lstm_layers) +
                       " (a config for other weights?)");
  for (int ratio : c.upsampling_ratios) {
    const int cur = scale * c.num_filters;
    ++idx;  // ELU
    StageW st;
    st.up = src.convt(name(idx++), cur, cur / 2, 2 * ratio, ratio);
    const int dim = cur / 2;
    const int hidden = dim / c.compress;
    CACHET_CHECK(hidden >= 1, "EnCodec: residual block width ", dim, " / compress ", c.compress,
                 " is zero");
    int dil = 1;
    for (int j = 0; j < c.num_residual_layers; ++j) {
      ResBlockW rb;
      const std::string p = name(idx++);
      rb.convs.push_back(src.conv(p + ".block.1", dim, hidden, c.residual_kernel_size, dil));
      rb.convs.push_back(src.conv(p + ".block.3", hidden, dim, 1, 1));
      rb.conv_shortcut = c.use_conv_shortcut;
      if (rb.conv_shortcut) rb.shortcut = src.conv(p + ".shortcut", dim, dim, 1, 1);
      st.res.push_back(std::move(rb));
      dil *= c.dilation_growth_rate;
    }
    m.stages.push_back(std::move(st));
    scale /= 2;
  }
  ++idx;  // ELU
  m.last = src.conv(name(idx++), c.num_filters, c.audio_channels, c.last_kernel_size, 1);
}

struct FileSource {
  Loader& ld;
  ConvW conv(const std::string& p, int cin, int cout, int k, int dil) {
    return ld.conv(p, cin, cout, k, dil);
  }
  ConvW convt(const std::string& p, int cin, int cout, int k, int s) {
    return ld.convt(p, cin, cout, k, s);
  }
  std::vector<float> mat(const std::string& n, int r, int cc) {
    return ld.read(ld.get(n, {r, cc}));
  }
  std::vector<float> vec(const std::string& n, int len) { return ld.vec(n, len); }
  // A tensor the config does not account for (more LSTM layers than num_lstm_layers)
  void refuse_extra(const std::string& n, const std::string& why) const { ld.refuse_extra(n, why); }
};

struct RandomSource {
  Rng rng;
  const EncodecConfig& cfg;
  ConvW conv(const std::string&, int cin, int cout, int k, int dil) {
    const float a = std::sqrt(3.0f / static_cast<float>(cin * k));
    ConvW c = make_conv(rng.vec(static_cast<size_t>(cout) * cin * k, a), rng.vec(cout, 0.05f), cin,
                        cout, k, dil);
    group_norm(&c);
    return c;
  }
  ConvW convt(const std::string&, int cin, int cout, int k, int s) {
    const float a = std::sqrt(3.0f * s / static_cast<float>(cin * k));
    ConvW c = make_convt(rng.vec(static_cast<size_t>(cin) * cout * k, a), rng.vec(cout, 0.05f), cin,
                         cout, k, s);
    group_norm(&c);
    return c;
  }
  std::vector<float> mat(const std::string&, int r, int cc) {
    return rng.vec(static_cast<size_t>(r) * cc, 1.0f / std::sqrt(static_cast<float>(cc)));
  }
  std::vector<float> vec(const std::string&, int len) { return rng.vec(len, 0.05f); }
  void refuse_extra(const std::string&, const std::string&) const {}
  void group_norm(ConvW* c) {
    if (cfg.norm_type != "time_group_norm") return;
    c->gn_w.assign(c->cout, 1.0f);
    c->gn_b.assign(c->cout, 0.0f);
  }
};

// ---------------------------------------------------------------------------------------------
// Forward

constexpr int64_t kColFloats = 1 << 18;        // im2col block (1 MiB)
constexpr int64_t kMaxWorkFloats = 1LL << 30;  // activations of one decode (4 GiB)

void elu_inplace(float* x, int64_t n) {
  float tmp[256];
  for (int64_t i = 0; i < n; i += 256) {
    const int64_t m = std::min<int64_t>(256, n - i);
    float* xi = x + i;
    // exp of the clamped value: below -20, e^x - 1 rounds to -1 in f32 anyway, and the clamp
    // keeps e^x out of the denormal range (slow on most CPUs).
    for (int64_t j = 0; j < m; ++j) tmp[j] = std::max(xi[j], -20.0f);
    ops::exp(tmp, tmp, m);
    for (int64_t j = 0; j < m; ++j) tmp[j] -= 1.0f;
    for (int64_t j = 0; j < m; ++j) xi[j] = xi[j] > 0.0f ? xi[j] : tmp[j];  // a vector blend
  }
}

// Index of the input row feeding padded row j (left pad p, input length L), or -1 for a zero.
// Reflect follows HF _pad1d: when L <= max pad, the input is first zero-extended on the right
// to max pad + 1 samples, reflected, and the extension dropped again.
int64_t pad_source(int64_t j, int64_t p, int64_t L, int64_t max_pad, PadMode mode) {
  const int64_t i = j - p;
  if (i >= 0 && i < L) return i;
  if (mode == PadMode::Constant) return -1;
  if (mode == PadMode::Replicate) return i < 0 ? 0 : L - 1;
  const int64_t Le = L <= max_pad ? max_pad + 1 : L;  // extended length (zeros past L)
  int64_t e;
  if (i < 0)
    e = -i;
  else if (i < Le)
    return -1;  // inside the zero extension
  else
    e = 2 * (Le - 1) - i;
  return e < L ? e : -1;
}

// xp [L + left + right][C] from x [L][C]: padded rows around x, ELU applied if asked.
float* pad_rows(const float* x, int64_t L, int64_t C, int64_t left, int64_t right, PadMode mode,
                bool elu, Buf& out, ThreadPool& pool) {
  const int64_t Lp = L + left + right;
  float* xp = out.get(Lp * C);
  const int64_t max_pad = std::max(left, right);
  pool.parallel_for(Lp, 64, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      float* dst = xp + j * C;
      const int64_t s = (L == 0) ? -1 : pad_source(j, left, L, max_pad, mode);
      if (s < 0)
        std::memset(dst, 0, static_cast<size_t>(C) * sizeof(float));
      else
        std::memcpy(dst, x + s * C, static_cast<size_t>(C) * sizeof(float));
    }
    if (elu) elu_inplace(xp + j0 * C, (j1 - j0) * C);
  });
  return xp;
}

// Y[t][0..rows) = W * concat_{k<taps} xp[t*step + k*dil] for t < n_out, where step is the
// conv stride (1 for the polyphase transposed conv, whose GEMM rows advance one input row).
void conv_gemm(const ConvW& c, const float* xp, int64_t n_out, float* y, Buf& colbuf,
               ThreadPool& pool) {
  const int64_t rows = c.rows(), cols = c.cols(), cin = c.cin;
  const int64_t step = c.transposed ? 1 : c.stride;
  if (n_out == 0) return;
  MatView w;
  w.type = DType::F32;
  w.rows = rows;
  w.cols = cols;
  w.data = c.w.data();
  w.row_stride = static_cast<size_t>(cols) * sizeof(float);
  const bool contiguous_rows = c.dil == 1;  // the taps of one row are adjacent input rows
  if (c.taps == 1 && step == 1) {
    matmul(w, xp, n_out, y, pool);
    return;
  }
  if (rows < 8 && contiguous_rows) {  // too few outputs for a GEMM panel: dot products
    pool.parallel_for(n_out, 256, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const float* col = xp + t * step * cin;
        for (int64_t o = 0; o < rows; ++o)
          y[t * rows + o] = ops::dot(c.w.data() + o * cols, col, cols);
      }
    });
    return;
  }
  const int64_t block = std::max<int64_t>(64, kColFloats / cols);
  float* col = colbuf.get(std::min(block, n_out) * cols);
  for (int64_t t0 = 0; t0 < n_out; t0 += block) {
    const int64_t nb = std::min(block, n_out - t0);
    pool.parallel_for(nb, 64, [&](int64_t a, int64_t b) {
      for (int64_t t = a; t < b; ++t) {
        float* dst = col + t * cols;
        const int64_t base = (t0 + t) * step;
        if (contiguous_rows) {
          std::memcpy(dst, xp + base * cin, static_cast<size_t>(cols) * sizeof(float));
        } else {
          for (int k = 0; k < c.taps; ++k)
            std::memcpy(dst + k * cin, xp + (base + static_cast<int64_t>(k) * c.dil) * cin,
                        static_cast<size_t>(cin) * sizeof(float));
        }
      }
    });
    matmul(w, col, nb, y + t0 * rows, pool);
  }
}

// Adds the bias to y [L][C], then GroupNorm(1, C) over all of y when the conv has one.
void bias_norm(const ConvW& c, float* y, int64_t L, ThreadPool& pool) {
  const int64_t C = c.cout;
  pool.parallel_for(L, 256, [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) ops::add(y + t * C, c.b.data(), y + t * C, C);
  });
  if (c.gn_w.empty() || L == 0) return;
  double s = 0, ss = 0;
  const int64_t n = L * C;
  for (int64_t i = 0; i < n; ++i) s += y[i];
  const double mean = s / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) ss += (y[i] - mean) * (y[i] - mean);
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-5);
  for (int64_t t = 0; t < L; ++t)
    for (int64_t o = 0; o < C; ++o) {
      float& v = y[t * C + o];
      v = static_cast<float>((v - mean) * inv) * c.gn_w[o] + c.gn_b[o];
    }
}

// HF EncodecConv1d on x [L][cin] (ELU first when elu) into out [L'][cout]; returns L'.
int64_t conv1d(const EncodecConfig& cfg, PadMode mode, const ConvW& c, const float* x, int64_t L,
               bool elu, Buf& out, Work& w, ThreadPool& pool) {
  const int64_t keff = static_cast<int64_t>(c.k - 1) * c.dil + 1;
  const int64_t pt = keff - c.stride;
  const int64_t extra = (L + c.stride - 1) / c.stride * c.stride - L;
  int64_t left, right;
  if (cfg.use_causal_conv) {
    left = pt;
    right = extra;
  } else {
    right = pt / 2;
    left = pt - right;
    right += extra;
  }
  const int64_t Lp = L + left + right;
  const int64_t n_out = Lp >= keff ? (Lp - keff) / c.stride + 1 : 0;
  float* y = out.get(n_out * c.cout);
  const float* xp = x;
  if (elu || left != 0 || right != 0)
    xp = pad_rows(x, L, c.cin, left, right, mode, elu, w.pad, pool);
  conv_gemm(c, xp, n_out, y, w.col, pool);
  bias_norm(c, y, n_out, pool);
  return n_out;
}

// HF EncodecConvTranspose1d on ELU(x) [L][cin] into out [L'][cout] after the trim; returns L'.
int64_t conv_transpose1d(const EncodecConfig& cfg, const ConvW& c, const float* x, int64_t L,
                         Buf& out, Work& w, ThreadPool& pool) {
  const int64_t s = c.stride, M = c.taps;
  const int64_t full = L > 0 ? (L - 1) * s + c.k : 0;
  const int64_t pt = c.k - s;
  const int64_t right =
      cfg.use_causal_conv
          ? static_cast<int64_t>(std::ceil(static_cast<double>(pt) * cfg.trim_right_ratio))
          : pt / 2;
  const int64_t left = pt - right;
  if (full - left - right <= 0) return 0;
  // GroupNorm (time_group_norm) runs on the untrimmed output, so its statistics need all of it.
  const bool gn = !c.gn_w.empty();
  const int64_t u0 = gn ? 0 : left, u1 = gn ? full : full - right;  // computed positions
  const int64_t q0 = u0 / s, q1 = (u1 + s - 1) / s;
  // xpad row j holds ELU(x[j - (M - 1)]), zeros outside [0, L).
  const float* xp = pad_rows(x, L, c.cin, M - 1, M - 1, PadMode::Constant, true, w.pad, pool);
  float* y = out.get((q1 - q0) * s * c.cout);
  conv_gemm(c, xp + q0 * c.cin, q1 - q0, y, w.col, pool);
  int64_t off = u0 - q0 * s, n = u1 - u0;
  if (gn) {
    bias_norm(c, y, n, pool);
    off = left;
    n = full - left - right;
  }
  if (off > 0) std::memmove(y, y + off * c.cout, static_cast<size_t>(n * c.cout) * sizeof(float));
  if (!gn) bias_norm(c, y, n, pool);
  return n;
}

void tanh_inplace(float* x, int64_t n) {  // tanh(x) = 2 sigmoid(2x) - 1
  for (int64_t i = 0; i < n; ++i) x[i] *= 2.0f;
  ops::sigmoid(x, x, n);
  for (int64_t i = 0; i < n; ++i) x[i] = 2.0f * x[i] - 1.0f;
}

// The stacked LSTM with its skip over n more rows x [n][h], into io [n][h]: LSTM(x) + x,
// continuing from and advancing the state st (zero at the start of a decode).
void lstm_rows(const LstmW& m, const float* x, int64_t n, float* io, LstmState& st, Work& w,
               ThreadPool& pool) {
  const int64_t h = m.h, g4 = 4 * h;
  std::memcpy(io, x, static_cast<size_t>(n * h) * sizeof(float));
  float* gates = w.gates.get(n * g4 + g4 + h);
  float* rec = gates + n * g4;
  float* tc = rec + g4;
  for (size_t l = 0; l < m.wih.size(); ++l) {
    const MatView wih{DType::F32, g4, h, m.wih[l].data(), static_cast<size_t>(h) * sizeof(float)};
    const MatView whh{DType::F32, g4, h, m.whh[l].data(), static_cast<size_t>(h) * sizeof(float)};
    float* hs = st.h.data() + static_cast<int64_t>(l) * h;
    float* cs = st.c.data() + static_cast<int64_t>(l) * h;
    matmul(wih, io, n, gates, pool);
    for (int64_t t = 0; t < n; ++t) {
      float* g = gates + t * g4;
      if (st.rows + t > 0) {  // h is zero before the first row
        matvec(whh, hs, rec, pool);
        ops::add(g, rec, g, g4);
      }
      ops::add(g, m.bias[l].data(), g, g4);
      ops::sigmoid(g, g, 2 * h);              // input, forget
      tanh_inplace(g + 2 * h, h);             // cell candidate
      ops::sigmoid(g + 3 * h, g + 3 * h, h);  // output
      for (int64_t i = 0; i < h; ++i) cs[i] = g[h + i] * cs[i] + g[i] * g[2 * h + i];
      std::memcpy(tc, cs, static_cast<size_t>(h) * sizeof(float));
      tanh_inplace(tc, h);
      float* o = io + t * h;  // row t of this layer's input is no longer needed
      for (int64_t i = 0; i < h; ++i) hs[i] = o[i] = g[3 * h + i] * tc[i];
    }
  }
  st.rows += n;
  ops::add(io, x, io, n * h);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public API

EncodecDecoder::EncodecDecoder() : impl_(std::make_unique<Impl>()) {}
EncodecDecoder::~EncodecDecoder() = default;

const EncodecConfig& EncodecDecoder::config() const {
  return impl_->cfg;
}

std::unique_ptr<EncodecDecoder> EncodecDecoder::load(const std::string& dir) {
  const ModelFiles f = ModelFiles::open(dir);
  std::unique_ptr<EncodecDecoder> d(new EncodecDecoder());
  Impl& m = *d->impl_;
  m.cfg = EncodecConfig::from_json(f.config, f.path + "/config.json");
  m.pad_mode = pad_mode_of(m.cfg);
  if (auto mt = f.config.find("model_type"); mt != f.config.end())
    CACHET_CHECK(!mt->is_string() || mt->get<std::string>() == "encodec", f.path,
                 ": config.json model_type is '", mt->get<std::string>(), "', not 'encodec'");
  CACHET_CHECK(m.cfg.codebook_dim == m.cfg.hidden_size, f.path, ": codebook_dim ",
               m.cfg.codebook_dim, " differs from hidden_size ", m.cfg.hidden_size,
               " (the decoder input)");
  Loader ld(f, m.cfg);
  for (int q = 0; q < m.cfg.num_quantizers; ++q) {
    const std::string name = "quantizer.layers." + std::to_string(q) + ".codebook.embed";
    const Tensor* t = f.find(name);
    if (!t) {
      CACHET_CHECK(q > 0, f.path, ": missing tensor '", name, "'");
      break;
    }
    ld.check_shape(*t, {m.cfg.codebook_size, m.cfg.codebook_dim});
    m.codebooks.push_back(ld.read(*t));
  }
  FileSource src{ld};
  build(m, src);
  return d;
}

std::unique_ptr<EncodecDecoder> EncodecDecoder::random(const EncodecConfig& cfg, uint64_t seed) {
  std::unique_ptr<EncodecDecoder> d(new EncodecDecoder());
  Impl& m = *d->impl_;
  m.cfg = cfg;
  m.pad_mode = pad_mode_of(m.cfg);
  RandomSource src{Rng{seed}, m.cfg};
  for (int q = 0; q < cfg.num_quantizers; ++q)
    m.codebooks.push_back(
        src.rng.vec(static_cast<size_t>(cfg.codebook_size) * cfg.codebook_dim, 1.0f));
  build(m, src);
  return d;
}

std::vector<float> EncodecDecoder::embed(const std::vector<std::vector<int32_t>>& codes) const {
  const Impl& m = *impl_;
  CACHET_CHECK(!codes.empty(), "EnCodec: no codebooks given");
  CACHET_CHECK(codes.size() <= m.codebooks.size(), "EnCodec: ", codes.size(),
               " codebooks given, the model has ", m.codebooks.size());
  const size_t T = codes[0].size();
  const int64_t D = m.cfg.codebook_dim;
  for (size_t q = 0; q < codes.size(); ++q) {
    CACHET_CHECK(codes[q].size() == T, "EnCodec: codebook ", q, " has ", codes[q].size(),
                 " codes, codebook 0 has ", T);
    for (size_t t = 0; t < T; ++t)
      CACHET_CHECK(codes[q][t] >= 0 && codes[q][t] < m.cfg.codebook_size, "EnCodec: code ",
                   codes[q][t], " (codebook ", q, ", frame ", t, ") is outside [0, ",
                   m.cfg.codebook_size, ")");
  }
  std::vector<float> e(T * static_cast<size_t>(D), 0.0f);
  for (size_t q = 0; q < codes.size(); ++q)
    for (size_t t = 0; t < T; ++t)
      ops::add(e.data() + t * D, m.codebooks[q].data() + static_cast<int64_t>(codes[q][t]) * D,
               e.data() + t * D, D);
  return e;
}

namespace {

// Decoding in pieces
//
// With causal convolutions, transposed ones trimmed on the right only (trim_right_ratio 1) and
// no GroupNorm over time, a sample depends on the frames up to its own and on a bounded number
// before them. (At the very start of the input the reflect padding of a convolution copies a
// few rows after the start, so the first piece must be longer than any padding: min_piece.)
// Such a decoder runs a piece of frames at a time: the first convolution over the piece's
// embeddings and the rows before them that it reaches back to, the LSTM continuing from where
// the previous piece left it, and the layers after it over the piece's rows and as many
// before them as their kernels reach back (stack_context). Every sample then comes from the
// same arithmetic as in a whole decode, and the activations are the size of a piece, not of
// the whole input: for the 24 kHz model and 96 frames (1.28 s), about 4 MiB each, paged in
// once per process rather than per second of audio. Other configurations decode in one piece.

constexpr int64_t kPieceFrames = 96;    // at most, per piece: CACHET_ENCODEC_PIECE
constexpr int64_t kGroupFrames = 1024;  // about, per group of pieces (below)

bool decodes_in_pieces(const EncodecConfig& c) {
  return c.use_causal_conv && c.trim_right_ratio == 1.0 && c.norm_type != "time_group_norm";
}

int64_t reach(const ConvW& c) {  // rows of input before an output row that it depends on
  return static_cast<int64_t>(c.k - 1) * c.dil;
}

// Rows of the LSTM's output before a piece's first that the layers after it need so that the
// piece's samples are those of a whole decode: from the last layer back, each convolution adds
// its reach, and a transposed one with stride s and kernel k turns a need of r output rows into
// ceil((r + k - s) / s) input rows (output row n takes input rows n / s and k / s - 1 before).
int64_t stack_context(const EncodecDecoder::Impl& m) {
  int64_t need = reach(m.last);
  for (auto st = m.stages.rbegin(); st != m.stages.rend(); ++st) {
    for (auto rb = st->res.rbegin(); rb != st->res.rend(); ++rb) {
      int64_t branch = 0;
      for (const ConvW& c : rb->convs) branch += reach(c);
      need += std::max(branch, rb->conv_shortcut ? reach(rb->shortcut) : int64_t{0});
    }
    need = (need + st->up.k - 1) / st->up.stride;  // ceil((need + k - s) / s)
  }
  return need;
}

// The fewest frames a piece may have: every convolution's input in the first piece must be
// longer than its padding, or HF's reflect rule for short inputs would apply to the piece
// and not to the whole input.
int64_t min_piece(const EncodecDecoder::Impl& m) {
  int64_t r = reach(m.first);
  for (const StageW& st : m.stages)
    for (const ResBlockW& rb : st.res)
      for (const ConvW& c : rb.convs) r = std::max(r, reach(c));
  return std::max(r, reach(m.last)) + 1;
}

// Grows the buffers once to (about) the largest size a decode needs, so that a first decode
// does not reallocate them layer after layer: the layers after the LSTM over `stack` rows,
// the LSTM's output kept for them (`lstm` rows, context included) and the first convolution
// over `first` rows. An underestimate only means a later reallocation.
void reserve(const EncodecConfig& c, int64_t stack, int64_t lstm, int64_t first, Work& w) {
  int64_t L = stack, cur = static_cast<int64_t>(c.num_filters) << c.upsampling_ratios.size();
  const int64_t dim = cur;
  int64_t act = std::max(stack, first) * cur, pad = (first + c.kernel_size) * c.hidden_size;
  int64_t h1 = 0, h2 = 0, dil = 1;
  for (int j = 1; j < c.num_residual_layers; ++j) dil *= c.dilation_growth_rate;
  for (int r : c.upsampling_ratios) {
    pad = std::max(pad, (L + 4) * cur);
    L *= r;
    cur /= 2;
    act = std::max(act, (L + 2 * r) * cur);
    pad = std::max(pad, (L + static_cast<int64_t>(c.residual_kernel_size) * dil) * cur);
    h1 = std::max(h1, (L + 1) * std::max<int64_t>(1, cur / c.compress));
    h2 = std::max(h2, (L + 1) * cur);
  }
  pad = std::max(pad, (L + c.last_kernel_size) * c.num_filters);
  act = std::max(act, L * c.audio_channels);
  const int64_t rows = lstm * dim, gates = (first + 2) * 4 * dim;  // as lstm_rows takes
  const int64_t total = 2 * act + pad + h1 + h2 + rows + gates;
  CACHET_CHECK(total <= kMaxWorkFloats, "EnCodec: ", stack, " frames (", L, " samples) need ",
               total * 4 / (1 << 20), " MiB of activations, more than the ",
               kMaxWorkFloats * 4 / (1 << 20), " MiB one decode may use; decode shorter pieces");
  w.a.get(act);
  w.b.get(act);
  w.pad.get(pad);
  w.h1.get(h1);
  w.h2.get(h2);
  w.frames.get(rows);
  if (c.num_lstm_layers > 0) w.gates.get(gates);
}

// The layers after the LSTM over x [L][dim] (not in w's buffers): the samples, L * hop rows
// of audio_channels, in the buffer returned.
const float* upsample(const EncodecDecoder::Impl& m, const float* x, int64_t L, Work& w,
                      ThreadPool& pool) {
  const EncodecConfig& cfg = m.cfg;
  const PadMode pm = m.pad_mode;
  const int64_t samples = L * cfg.hop_length();
  Buf* cur = &w.a;
  Buf* nxt = &w.b;
  for (const StageW& st : m.stages) {
    L = conv_transpose1d(cfg, st.up, x, L, *nxt, w, pool);
    std::swap(cur, nxt);
    for (const ResBlockW& rb : st.res) {
      const int64_t L1 = conv1d(cfg, pm, rb.convs[0], cur->data(), L, true, w.h1, w, pool);
      const int64_t L2 = conv1d(cfg, pm, rb.convs[1], w.h1.data(), L1, true, w.h2, w, pool);
      int64_t L3 = L;
      if (rb.conv_shortcut) {
        L3 = conv1d(cfg, pm, rb.shortcut, cur->data(), L, false, *nxt, w, pool);
        std::swap(cur, nxt);
      }
      CACHET_CHECK(L2 == L3, "EnCodec: residual branch length ", L2, " differs from ", L3);
      const int64_t C = rb.convs[1].cout;
      float* y = cur->data();
      const float* h = w.h2.data();
      pool.parallel_for(L2, 1024, [&](int64_t a, int64_t b) {
        ops::add(y + a * C, h + a * C, y + a * C, (b - a) * C);
      });
      L = L2;
    }
    x = cur->data();
  }
  L = conv1d(cfg, pm, m.last, x, L, true, *nxt, w, pool);
  CACHET_CHECK(L == samples, "EnCodec: the decoder gave ", L, " samples, not ", samples);
  return nxt->data();
}

void decode_into(const EncodecDecoder::Impl& m, const std::vector<float>& emb, int64_t T, Work& w,
                 std::vector<std::vector<float>>& out, ThreadPool& pool) {
  const EncodecConfig& cfg = m.cfg;
  const bool pieces = decodes_in_pieces(cfg);
  // Pieces of about equal size: the last is not a few frames, whose products would take
  // matmul's path for a few rows (another order of sums, so not the same floats), and each is
  // at least min_piece long.
  const int64_t fewest = min_piece(m);
  const int64_t most =
      pieces ? std::max(env_count("CACHET_ENCODEC_PIECE", kPieceFrames), fewest) : T;
  const int64_t count = std::max<int64_t>(1, std::min((T + most - 1) / most, T / fewest));
  const int64_t piece = (T + count - 1) / count;  // the longest
  // The first convolution and the LSTM take `group` pieces at a time (CACHET_ENCODEC_GROUP
  // overrides): their products then read, and matmul packs, their weights once per group
  // rather than once per piece (one piece at a time, the LSTM took 97-101 ms of a 10 s decode
  // against 80-87 in one piece).
  const int64_t group =
      env_count("CACHET_ENCODEC_GROUP", std::max<int64_t>(1, kGroupFrames / piece));
  const int64_t before_first = pieces ? reach(m.first) : 0;  // rows before a piece, per layer
  const int64_t before_stack = pieces ? stack_context(m) : 0;
  const int64_t E = m.first.cin, D = m.first.cout, hop = cfg.hop_length();
  const int C = cfg.audio_channels;
  const int64_t most_rows = std::min(count, group) * piece;  // of a group
  reserve(cfg, piece + before_stack, most_rows + before_stack, most_rows + before_first, w);
  for (auto& o : out) o.assign(static_cast<size_t>(T * hop), 0.0f);
  LstmState lstm;
  lstm.h.assign(m.lstm.wih.size() * static_cast<size_t>(m.lstm.h), 0.0f);
  lstm.c = lstm.h;
  float* rows = w.frames.get((most_rows + before_stack) * D);
  int64_t kept = 0;  // rows of the frames before the group, at the front of `rows`
  for (int64_t k0 = 0; k0 < count; k0 += group) {
    const int64_t k1 = std::min(count, k0 + group);
    const int64_t A = T * k0 / count, B = T * k1 / count,
                  A1 = std::max<int64_t>(0, A - before_first);
    const int64_t L0 =
        conv1d(cfg, m.pad_mode, m.first, emb.data() + A1 * E, B - A1, false, w.a, w, pool);
    CACHET_CHECK(L0 == B - A1, "EnCodec: first convolution gave ", L0, " rows for ", B - A1);
    const float* x = w.a.data() + (A - A1) * D;
    float* dst = rows + kept * D;
    if (m.lstm.wih.empty())
      std::memcpy(dst, x, static_cast<size_t>((B - A) * D) * sizeof(float));
    else
      lstm_rows(m.lstm, x, B - A, dst, lstm, w, pool);
    const int64_t base = A - kept;  // the frame of row 0 of `rows`
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t a = T * k / count, b = T * (k + 1) / count, n = b - a;
      const int64_t from = std::max(base, a - before_stack);
      const float* y = upsample(m, rows + (from - base) * D, b - from, w, pool);
      for (int ch = 0; ch < C; ++ch) {
        float* o = out[static_cast<size_t>(ch)].data() + a * hop;
        const float* src = y + (a - from) * hop * C + ch;
        for (int64_t t = 0; t < n * hop; ++t) o[t] = src[t * C];
      }
    }
    const int64_t have = B - base, keep = std::min(before_stack, have);
    std::memmove(rows, rows + (have - keep) * D, static_cast<size_t>(keep * D) * sizeof(float));
    kept = keep;
  }
}

}  // namespace

std::vector<std::vector<float>> EncodecDecoder::decode(
    const std::vector<std::vector<int32_t>>& codes, ThreadPool& pool) const {
  const std::vector<float> emb = embed(codes);
  const int64_t T = static_cast<int64_t>(codes[0].size());
  std::vector<std::vector<float>> out(static_cast<size_t>(impl_->cfg.audio_channels));
  if (T == 0) return out;
  std::unique_lock<std::mutex> lock(impl_->work_mu, std::try_to_lock);
  if (lock.owns_lock()) {
    decode_into(*impl_, emb, T, impl_->work, out, pool);
  } else {
    Work w;
    decode_into(*impl_, emb, T, w, out, pool);
  }
  return out;
}

std::vector<float> EncodecDecoder::decode_mono(const std::vector<std::vector<int32_t>>& codes,
                                               ThreadPool& pool) const {
  CACHET_CHECK(impl_->cfg.audio_channels == 1, "EnCodec: decode_mono on a model with ",
               impl_->cfg.audio_channels, " audio channels");
  return std::move(decode(codes, pool)[0]);
}

}  // namespace cachet

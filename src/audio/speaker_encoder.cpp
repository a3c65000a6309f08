#include "cachet/speaker_encoder.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "cachet/error.h"
#include "cachet/half.h"
#include "cachet/kernels.h"
#include "cachet/safetensors.h"
#include "cachet/threadpool.h"
#include "cachet/torch_checkpoint.h"
#include "cachet/wav.h"

namespace cachet {

namespace sf = speaker_frontend;

namespace speaker_frontend {

std::vector<float> trim_silence(std::span<const float> y, double top_db) {
  constexpr int64_t kFrame = 2048, kHopT = 512;
  const auto n = static_cast<int64_t>(y.size());
  if (n == 0) return {};
  const int64_t frames = 1 + n / kHopT;
  std::vector<double> mse(frames);
  // RMS^2 of frames centred with zero padding of kFrame / 2 on each side.
  for (int64_t t = 0; t < frames; ++t) {
    const int64_t start = t * kHopT - kFrame / 2;
    const int64_t a = std::max<int64_t>(start, 0), b = std::min<int64_t>(start + kFrame, n);
    double s = 0;
    for (int64_t i = a; i < b; ++i) s += static_cast<double>(y[i]) * y[i];
    mse[t] = s / kFrame;
  }
  const double amin = 1e-10;
  const double ref = std::max(amin, *std::max_element(mse.begin(), mse.end()));
  int64_t first = -1, last = -1;
  for (int64_t t = 0; t < frames; ++t) {
    const double db = 10.0 * std::log10(std::max(amin, mse[t])) - 10.0 * std::log10(ref);
    if (db > -top_db) {
      if (first < 0) first = t;
      last = t;
    }
  }
  if (first < 0) return {};
  const int64_t b = first * kHopT, e = std::min(n, (last + 1) * kHopT);
  return std::vector<float>(y.begin() + b, y.begin() + std::max(b, e));
}

namespace {
double hz_to_mel(double f) {  // Slaney
  const double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
  const double logstep = std::log(6.4) / 27.0;
  if (f >= min_log_hz) return min_log_mel + std::log(f / min_log_hz) / logstep;
  return f / f_sp;
}
double mel_to_hz(double m) {
  const double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
  const double logstep = std::log(6.4) / 27.0;
  if (m >= min_log_mel) return min_log_hz * std::exp(logstep * (m - min_log_mel));
  return f_sp * m;
}
}  // namespace

std::vector<float> mel_filterbank() {
  constexpr int kBins = kNfft / 2 + 1;
  const double fmax = kSampleRate / 2.0;
  std::vector<double> mel_f(kMels + 2);
  const double m0 = hz_to_mel(0.0), m1 = hz_to_mel(fmax);
  for (int i = 0; i < kMels + 2; ++i)
    mel_f[i] = mel_to_hz(m0 + (m1 - m0) * i / static_cast<double>(kMels + 1));
  std::vector<float> w(static_cast<size_t>(kMels) * kBins);
  for (int m = 0; m < kMels; ++m) {
    const double fd0 = mel_f[m + 1] - mel_f[m], fd1 = mel_f[m + 2] - mel_f[m + 1];
    const double enorm = 2.0 / (mel_f[m + 2] - mel_f[m]);
    for (int k = 0; k < kBins; ++k) {
      const double f = static_cast<double>(k) * kSampleRate / kNfft;
      const double lower = -(mel_f[m] - f) / fd0;
      const double upper = (mel_f[m + 2] - f) / fd1;
      const auto v = static_cast<float>(std::max(0.0, std::min(lower, upper)));
      w[static_cast<size_t>(m) * kBins + k] = static_cast<float>(v * enorm);
    }
  }
  return w;
}

std::vector<float> mel_spectrogram(std::span<const float> y, int64_t* n_frames) {
  constexpr int kBins = kNfft / 2 + 1;
  const auto n = static_cast<int64_t>(y.size());
  const int64_t frames = 1 + n / kHop;
  *n_frames = frames;
  static const std::vector<float> fb = mel_filterbank();
  // DFT tables with the periodic Hann window folded in.
  static const std::vector<double> tables = [] {
    std::vector<double> t(static_cast<size_t>(2) * kBins * kNfft);
    for (int k = 0; k < kBins; ++k)
      for (int m = 0; m < kNfft; ++m) {
        const double w = 0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * m / kNfft);
        const double ang = 2.0 * std::numbers::pi * static_cast<double>((k * m) % kNfft) / kNfft;
        t[(static_cast<size_t>(k) * kNfft + m) * 2] = w * std::cos(ang);
        t[(static_cast<size_t>(k) * kNfft + m) * 2 + 1] = -w * std::sin(ang);
      }
    return t;
  }();
  std::vector<float> out(static_cast<size_t>(frames) * kMels);
  std::vector<double> x(kNfft), power(kBins);
  for (int64_t t = 0; t < frames; ++t) {
    const int64_t start = t * kHop - kNfft / 2;
    for (int m = 0; m < kNfft; ++m) {
      const int64_t i = start + m;
      x[m] = (i >= 0 && i < n) ? static_cast<double>(y[i]) : 0.0;
    }
    for (int k = 0; k < kBins; ++k) {
      const double* tab = &tables[static_cast<size_t>(k) * kNfft * 2];
      double re = 0, im = 0;
      for (int m = 0; m < kNfft; ++m) {
        re += tab[2 * m] * x[m];
        im += tab[2 * m + 1] * x[m];
      }
      power[k] = re * re + im * im;
    }
    for (int mel = 0; mel < kMels; ++mel) {
      const float* w = &fb[static_cast<size_t>(mel) * kBins];
      double s = 0;
      for (int k = 0; k < kBins; ++k) s += static_cast<double>(w[k]) * power[k];
      out[static_cast<size_t>(t) * kMels + mel] = static_cast<float>(s);
    }
  }
  return out;
}

std::vector<int64_t> partial_starts(int64_t n_samples) {
  constexpr double kRate = 1.3, kMinCoverage = 0.75;
  const int64_t samples_per_frame = kHop;
  const auto n_frames =
      static_cast<int64_t>(std::ceil(static_cast<double>(n_samples + 1) / samples_per_frame));
  const auto frame_step =
      static_cast<int64_t>(std::nearbyint(kSampleRate / kRate / samples_per_frame));
  const int64_t steps = std::max<int64_t>(1, n_frames - kPartialFrames + frame_step + 1);
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < steps; i += frame_step) starts.push_back(i);
  const int64_t last = starts.back() * samples_per_frame;
  const double coverage = static_cast<double>(n_samples - last) /
                          static_cast<double>(kPartialFrames * samples_per_frame);
  if (coverage < kMinCoverage && starts.size() > 1) starts.pop_back();
  return starts;
}

}  // namespace speaker_frontend

namespace {

Tensor to_f32(const Tensor& t, const std::string& path) {
  Tensor out = Tensor::zeros(DType::F32, t.shape, t.name);
  CACHET_CHECK(t.contiguous(), path, ": tensor '", t.name, "' is not contiguous");
  float* o = out.as<float>();
  const int64_t n = t.numel();
  switch (t.dtype) {
    case DType::F32:
      std::copy(t.as<float>(), t.as<float>() + n, o);
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) o[i] = f16_to_f32(t.as<uint16_t>()[i]);
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) o[i] = bf16_to_f32(t.as<uint16_t>()[i]);
      break;
    case DType::F64:
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(t.as<double>()[i]);
      break;
    default:
      fail(path, ": tensor '", t.name, "' has dtype ", dtype_name(t.dtype),
           "; the speaker encoder needs F32, F16, BF16 or F64");
  }
  for (int64_t i = 0; i < n; ++i)
    CACHET_CHECK(std::isfinite(o[i]), path, ": tensor '", t.name, "' holds a non-finite value");
  return out;
}

Tensor get_f32(const SafetensorsFile& f, const std::string& name,
               const std::vector<int64_t>& shape) {
  const Tensor* t = f.find(name);
  CACHET_CHECK(t, f.path(), ": missing tensor '", name,
               "' (expected the speaker encoder's state dict: lstm.*, linear.*)");
  CACHET_CHECK(t->shape == shape, f.path(), ": tensor '", name, "' has shape ", t->shape_str(),
               ", expected ", Tensor::view(DType::F32, shape, nullptr).shape_str());
  Tensor c = *t;
  c.name = name;
  return to_f32(c, f.path());
}

void normalize_rows(float* x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * cols;
    double s = 0;
    for (int64_t i = 0; i < cols; ++i) s += static_cast<double>(v[i]) * v[i];
    const auto inv = static_cast<float>(1.0 / std::sqrt(s));
    for (int64_t i = 0; i < cols; ++i) v[i] *= inv;
  }
}

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

}  // namespace

SpeakerEncoder SpeakerEncoder::load(const std::string& safetensors_path) {
  std::shared_ptr<SafetensorsFile> f;
  const std::string pt = ".pt";
  if (safetensors_path.size() > pt.size() &&
      safetensors_path.compare(safetensors_path.size() - pt.size(), pt.size(), pt) == 0) {
    // The original's speaker_encoder.pt: its "model_state", through an in-memory safetensors.
    SafetensorsWriter w;
    const std::vector<Tensor> ts = read_torch_checkpoint(safetensors_path, "model_state");
    for (const Tensor& t : ts) w.add_tensor(t.name, t);
    const std::vector<uint8_t> bytes = w.to_bytes();
    f = SafetensorsFile::from_memory(bytes.data(), bytes.size(), safetensors_path);
  } else {
    f = SafetensorsFile::open(safetensors_path);
  }
  SpeakerEncoder e;
  e.path_ = safetensors_path;
  constexpr int64_t kH = 256, kG = 4 * kH;
  for (int l = 0; l < 3; ++l) {
    const std::string s = std::to_string(l);
    const int64_t in = l == 0 ? sf::kMels : kH;
    e.w_ih_.push_back(get_f32(*f, "lstm.weight_ih_l" + s, {kG, in}));
    e.w_hh_.push_back(get_f32(*f, "lstm.weight_hh_l" + s, {kG, kH}));
    const Tensor bi = get_f32(*f, "lstm.bias_ih_l" + s, {kG});
    const Tensor bh = get_f32(*f, "lstm.bias_hh_l" + s, {kG});
    std::vector<float> b(kG);
    for (int64_t i = 0; i < kG; ++i) b[i] = bi.as<float>()[i] + bh.as<float>()[i];
    e.bias_.push_back(std::move(b));
  }
  e.lin_w_ = get_f32(*f, "linear.weight", {kEmbedDim, kH});
  const Tensor lb = get_f32(*f, "linear.bias", {kEmbedDim});
  e.lin_b_.assign(lb.as<float>(), lb.as<float>() + kEmbedDim);
  return e;
}

std::vector<float> SpeakerEncoder::forward(std::span<const float> mels, int64_t n_partials,
                                           ThreadPool& pool) const {
  constexpr int64_t kH = 256, kG = 4 * kH, kT = sf::kPartialFrames;
  CACHET_CHECK(n_partials > 0 && static_cast<int64_t>(mels.size()) == n_partials * kT * sf::kMels,
               path_, ": speaker encoder input must be [n, 160, 40]");
  const int64_t P = n_partials;
  // Sequence of the current layer, [P, T, in] row-major.
  std::vector<float> seq(mels.begin(), mels.end());
  int64_t in = sf::kMels;
  std::vector<float> xw, gates(P * kG), h(P * kH), c(P * kH), out;
  for (size_t l = 0; l < w_ih_.size(); ++l) {
    // Input projections of every step at once: [P * T, 4H].
    xw.assign(static_cast<size_t>(P * kT * kG), 0.0f);
    matmul(MatView::of(w_ih_[l]), seq.data(), P * kT, xw.data(), pool);
    std::fill(h.begin(), h.end(), 0.0f);
    std::fill(c.begin(), c.end(), 0.0f);
    out.assign(static_cast<size_t>(P * kT * kH), 0.0f);
    const float* b = bias_[l].data();
    for (int64_t t = 0; t < kT; ++t) {
      matmul(MatView::of(w_hh_[l]), h.data(), P, gates.data(), pool);
      for (int64_t p = 0; p < P; ++p) {
        const float* gx = &xw[static_cast<size_t>((p * kT + t) * kG)];
        const float* gh = &gates[static_cast<size_t>(p * kG)];
        float* hp = &h[static_cast<size_t>(p * kH)];
        float* cp = &c[static_cast<size_t>(p * kH)];
        for (int64_t j = 0; j < kH; ++j) {
          const float ig = sigmoid(gx[j] + gh[j] + b[j]);
          const float fg = sigmoid(gx[kH + j] + gh[kH + j] + b[kH + j]);
          const float gg = std::tanh(gx[2 * kH + j] + gh[2 * kH + j] + b[2 * kH + j]);
          const float og = sigmoid(gx[3 * kH + j] + gh[3 * kH + j] + b[3 * kH + j]);
          cp[j] = fg * cp[j] + ig * gg;
          hp[j] = og * std::tanh(cp[j]);
        }
        std::copy(hp, hp + kH, &out[static_cast<size_t>((p * kT + t) * kH)]);
      }
    }
    seq.swap(out);
    in = kH;
  }
  (void)in;
  // hidden[-1]: the last layer's state after the last step (h).
  std::vector<float> emb(static_cast<size_t>(P * kEmbedDim));
  matmul(MatView::of(lin_w_), h.data(), P, emb.data(), pool);
  for (int64_t p = 0; p < P; ++p)
    for (int64_t j = 0; j < kEmbedDim; ++j) {
      float& v = emb[static_cast<size_t>(p * kEmbedDim + j)];
      v = std::max(0.0f, v + lin_b_[j]);
    }
  normalize_rows(emb.data(), P, kEmbedDim);
  return emb;
}

std::vector<float> SpeakerEncoder::embed_utterance(std::span<const float> wav16k,
                                                   ThreadPool& pool) const {
  CACHET_CHECK(!wav16k.empty(), path_, ": the speaker audio is empty (silent or no samples)");
  CACHET_CHECK(static_cast<double>(wav16k.size()) <= kMaxSeconds * sf::kSampleRate,
               "the speaker audio is ", static_cast<double>(wav16k.size()) / sf::kSampleRate,
               " s long; the speaker encoder takes at most ", kMaxSeconds,
               " s (cut a shorter clip)");
  const auto n = static_cast<int64_t>(wav16k.size());
  const std::vector<int64_t> starts = sf::partial_starts(n);
  const int64_t max_len = (starts.back() + sf::kPartialFrames) * sf::kHop;
  std::vector<float> wav(wav16k.begin(), wav16k.end());
  if (max_len >= n) wav.resize(static_cast<size_t>(max_len), 0.0f);
  int64_t frames = 0;
  const std::vector<float> mel = sf::mel_spectrogram(wav, &frames);
  const auto P = static_cast<int64_t>(starts.size());
  std::vector<float> mels(static_cast<size_t>(P * sf::kPartialFrames * sf::kMels));
  for (int64_t p = 0; p < P; ++p) {
    CACHET_CHECK(starts[p] + sf::kPartialFrames <= frames, path_, ": internal slice error");
    std::copy(mel.begin() + starts[p] * sf::kMels,
              mel.begin() + (starts[p] + sf::kPartialFrames) * sf::kMels,
              mels.begin() + p * sf::kPartialFrames * sf::kMels);
  }
  const std::vector<float> partial = forward(mels, P, pool);
  std::vector<float> e(kEmbedDim, 0.0f);
  for (int64_t p = 0; p < P; ++p)
    for (int64_t j = 0; j < kEmbedDim; ++j) e[j] += partial[static_cast<size_t>(p * kEmbedDim + j)];
  for (auto& v : e) v /= static_cast<float>(P);
  normalize_rows(e.data(), 1, kEmbedDim);
  for (float v : e)
    CACHET_CHECK(std::isfinite(v), path_,
                 ": the speaker embedding is not finite (is the reference audio silent?)");
  return e;
}

std::vector<float> SpeakerEncoder::embed(std::span<const float> mono, int sample_rate,
                                         ThreadPool& pool) const {
  CACHET_CHECK(sample_rate > 0, path_, ": invalid sample rate ", sample_rate);
  CACHET_CHECK(!mono.empty(), path_, ": the speaker audio has no samples");
  const double seconds = static_cast<double>(mono.size()) / sample_rate;
  CACHET_CHECK(seconds <= kMaxSeconds, "the speaker audio is ", seconds,
               " s long; the speaker encoder takes at most ", kMaxSeconds,
               " s (cut a shorter clip)");
  std::vector<float> y;
  if (sample_rate == sf::kSampleRate) {
    y.assign(mono.begin(), mono.end());
  } else {
    y = resample(mono.data(), static_cast<int64_t>(mono.size()), sample_rate, sf::kSampleRate);
  }
  const std::vector<float> trimmed = sf::trim_silence(y, 20.0);
  return embed_utterance(trimmed, pool);
}

}  // namespace cachet

// EnCodec configuration (HF config.json) and codes files: the readers of what users hand over,
// apart from the decoder itself (encodec.cpp), so that they stand on the formats layer alone.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cachet/encodec.h"
#include "cachet/error.h"
#include "cachet/model_files.h"

namespace cachet {

using nlohmann::json;

namespace {

const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

int get_int(const json& j, const char* key, int def, const std::string& where, int lo, int hi) {
  const json* v = field(j, key);
  if (!v) return def;
  if (!v->is_number()) fail(where, ": config field '", key, "' must be a number, got ", v->dump());
  const auto n = json_integer(*v);
  if (!n || *n < lo || *n > hi)
    fail(where, ": config field '", key, "' = ", v->dump(), " must be an integer in [", lo, ", ",
         hi, "]");
  return static_cast<int>(*n);
}

bool get_bool(const json& j, const char* key, bool def, const std::string& where) {
  const json* v = field(j, key);
  if (!v) return def;
  if (!v->is_boolean()) fail(where, ": config field '", key, "' must be true or false");
  return v->get<bool>();
}

}  // namespace

int EncodecConfig::hop_length() const {
  int64_t h = 1;
  for (int r : upsampling_ratios) h *= r;
  return static_cast<int>(h);
}

int EncodecConfig::frame_rate() const {
  const int h = hop_length();
  return (sampling_rate + h - 1) / h;
}

EncodecConfig EncodecConfig::from_json(const json& j, const std::string& where) {
  CACHET_CHECK(j.is_object(), where, ": config is not a JSON object");
  EncodecConfig c;
  c.sampling_rate = get_int(j, "sampling_rate", c.sampling_rate, where, 1, 10'000'000);
  c.audio_channels = get_int(j, "audio_channels", c.audio_channels, where, 1, 64);
  c.hidden_size = get_int(j, "hidden_size", c.hidden_size, where, 1, 1 << 16);
  c.codebook_dim = get_int(j, "codebook_dim", c.hidden_size, where, 1, 1 << 16);
  c.codebook_size = get_int(j, "codebook_size", c.codebook_size, where, 1, 1 << 24);
  c.num_filters = get_int(j, "num_filters", c.num_filters, where, 1, 1 << 16);
  c.num_residual_layers = get_int(j, "num_residual_layers", c.num_residual_layers, where, 0, 64);
  c.kernel_size = get_int(j, "kernel_size", c.kernel_size, where, 1, 1024);
  c.last_kernel_size = get_int(j, "last_kernel_size", c.last_kernel_size, where, 1, 1024);
  c.residual_kernel_size =
      get_int(j, "residual_kernel_size", c.residual_kernel_size, where, 1, 1024);
  c.dilation_growth_rate =
      get_int(j, "dilation_growth_rate", c.dilation_growth_rate, where, 1, 1024);
  c.use_causal_conv = get_bool(j, "use_causal_conv", c.use_causal_conv, where);
  c.compress = get_int(j, "compress", c.compress, where, 1, 1 << 16);
  c.num_lstm_layers = get_int(j, "num_lstm_layers", c.num_lstm_layers, where, 0, 64);
  c.use_conv_shortcut = get_bool(j, "use_conv_shortcut", c.use_conv_shortcut, where);
  if (const json* v = field(j, "pad_mode")) {
    CACHET_CHECK(v->is_string(), where, ": config field 'pad_mode' must be a string");
    c.pad_mode = v->get<std::string>();
  }
  CACHET_CHECK(c.pad_mode == "reflect" || c.pad_mode == "constant" || c.pad_mode == "replicate",
               where, ": pad_mode '", c.pad_mode,
               "' is not supported (reflect, constant or replicate)");
  if (const json* v = field(j, "norm_type")) {
    CACHET_CHECK(v->is_string(), where, ": config field 'norm_type' must be a string");
    c.norm_type = v->get<std::string>();
  }
  CACHET_CHECK(c.norm_type == "weight_norm" || c.norm_type == "time_group_norm", where,
               ": norm_type '", c.norm_type, "' is not supported (weight_norm or time_group_norm)");
  if (const json* v = field(j, "trim_right_ratio")) {
    CACHET_CHECK(v->is_number(), where, ": config field 'trim_right_ratio' must be a number");
    c.trim_right_ratio = v->get<double>();
  }
  CACHET_CHECK(c.trim_right_ratio >= 0.0 && c.trim_right_ratio <= 1.0, where, ": trim_right_ratio ",
               c.trim_right_ratio, " is outside [0, 1]");
  CACHET_CHECK(c.use_causal_conv || c.trim_right_ratio == 1.0, where,
               ": trim_right_ratio != 1.0 only makes sense for causal convolutions");
  if (const json* v = field(j, "upsampling_ratios")) {
    CACHET_CHECK(v->is_array() && !v->empty() && v->size() <= 16, where,
                 ": config field 'upsampling_ratios' must be a non-empty array of integers");
    c.upsampling_ratios.clear();
    for (const json& r : *v) {
      CACHET_CHECK(r.is_number_integer() && r.get<int64_t>() >= 1 && r.get<int64_t>() <= 1024,
                   where, ": upsampling_ratios entry ", r.dump(),
                   " is not an integer in [1, 1024]");
      c.upsampling_ratios.push_back(r.get<int>());
    }
  }
  int64_t hop = 1;
  for (int r : c.upsampling_ratios) hop *= r;
  CACHET_CHECK(hop <= (1 << 20), where, ": upsampling_ratios multiply to ", hop, ", too large");
  CACHET_CHECK(static_cast<int64_t>(c.num_filters) << c.upsampling_ratios.size() <= (1 << 20),
               where, ": num_filters ", c.num_filters, " * 2^", c.upsampling_ratios.size(),
               " channels is too large");
  if (const json* v = field(j, "target_bandwidths")) {
    CACHET_CHECK(v->is_array() && !v->empty(), where,
                 ": config field 'target_bandwidths' must be a non-empty array of numbers");
    c.target_bandwidths.clear();
    for (const json& b : *v) {
      CACHET_CHECK(b.is_number() && b.get<double>() > 0 && b.get<double>() < 1e6, where,
                   ": target_bandwidths entry ", b.dump(), " is not a positive number");
      c.target_bandwidths.push_back(b.get<double>());
    }
  }
  const double nq = std::floor(1000.0 * c.target_bandwidths.back() / (c.frame_rate() * 10.0));
  c.num_quantizers = static_cast<int>(std::clamp(nq, 1.0, 4096.0));
  return c;
}

std::vector<std::vector<int32_t>> codes_from_json(const json& j, const std::string& where) {
  const json* rows = &j;
  if (j.is_object()) {
    const json* c = field(j, "codes");
    CACHET_CHECK(c, where, ": no \"codes\" key");
    rows = c;
  }
  CACHET_CHECK(rows->is_array() && !rows->empty(), where,
               ": \"codes\" must be a non-empty array of arrays of integers");
  std::vector<std::vector<int32_t>> codes;
  for (size_t q = 0; q < rows->size(); ++q) {
    const json& r = (*rows)[q];
    CACHET_CHECK(r.is_array(), where, ": codes row ", q, " is not an array");
    std::vector<int32_t> row;
    row.reserve(r.size());
    for (size_t t = 0; t < r.size(); ++t) {
      const json& v = r[t];
      CACHET_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX,
                   where, ": codes[", q, "][", t, "] = ", v.dump(), " is not a valid code");
      row.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    CACHET_CHECK(row.size() == (*rows)[0].size(), where, ": codes row ", q, " has ", row.size(),
                 " entries, row 0 has ", (*rows)[0].size());
    codes.push_back(std::move(row));
  }
  return codes;
}

std::vector<std::vector<int32_t>> read_codes_json(const std::string& path) {
  return codes_from_json(read_json_file(path), path);
}

}  // namespace cachet

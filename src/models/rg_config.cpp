// RecurrentGemma configuration: parsing and validation of an HF config.json.
#include <cmath>
#include <limits>

#include "cachet/error.h"
#include "cachet/model_files.h"
#include "cachet/recurrent_gemma.h"

namespace cachet {

namespace {

using nlohmann::json;

const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

int64_t to_int(const json& v, const char* key, const std::string& where) {
  if (const auto n = json_integer(v)) return *n;
  if (v.is_number_unsigned()) fail(where, ": config field '", key, "' is out of range");
  fail(where, ": config field '", key, "' must be an integer, got ", v.dump());
}

int64_t req_int(const json& j, const char* key, const std::string& where) {
  const json* v = field(j, key);
  if (!v) fail(where, ": config field '", key, "' is required");
  return to_int(*v, key, where);
}

int64_t opt_int(const json& j, const char* key, int64_t def, const std::string& where) {
  const json* v = field(j, key);
  return v ? to_int(*v, key, where) : def;
}

double opt_float(const json& j, const char* key, double def, const std::string& where) {
  const json* v = field(j, key);
  if (!v) return def;
  if (!v->is_number()) fail(where, ": config field '", key, "' must be a number, got ", v->dump());
  const double d = v->get<double>();
  if (!std::isfinite(d)) fail(where, ": config field '", key, "' is not finite");
  return d;
}

void check_range(int64_t v, int64_t lo, int64_t hi, const char* key, const std::string& where) {
  if (v < lo || v > hi)
    fail(where, ": config field '", key, "' = ", v, " is outside [", lo, ", ", hi, "]");
}

}  // namespace

RecurrentGemmaConfig RecurrentGemmaConfig::from_json(const json& j, const std::string& where) {
  if (!j.is_object()) fail(where, ": config is not a JSON object");
  if (const json* mt = field(j, "model_type")) {
    if (!mt->is_string() || mt->get<std::string>() != "recurrent_gemma")
      fail(where, ": config model_type is ", mt->dump(), ", expected \"recurrent_gemma\"");
  }
  RecurrentGemmaConfig c;
  c.vocab_size = req_int(j, "vocab_size", where);
  c.hidden_size = req_int(j, "hidden_size", where);
  c.intermediate_size = req_int(j, "intermediate_size", where);
  c.num_hidden_layers = req_int(j, "num_hidden_layers", where);
  c.num_attention_heads = req_int(j, "num_attention_heads", where);
  c.num_key_value_heads = req_int(j, "num_key_value_heads", where);
  check_range(c.vocab_size, 1, int64_t{1} << 24, "vocab_size", where);
  check_range(c.hidden_size, 1, int64_t{1} << 16, "hidden_size", where);
  check_range(c.intermediate_size, 2, int64_t{1} << 20, "intermediate_size", where);
  check_range(c.num_hidden_layers, 1, 4096, "num_hidden_layers", where);
  check_range(c.num_attention_heads, 1, 4096, "num_attention_heads", where);
  check_range(c.num_key_value_heads, 1, c.num_attention_heads, "num_key_value_heads", where);
  if (c.intermediate_size % 2 != 0)
    fail(where, ": config field 'intermediate_size' = ", c.intermediate_size,
         " must be even (each MLP branch is intermediate_size / 2 wide)");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(where, ": num_attention_heads ", c.num_attention_heads,
         " is not a multiple of num_key_value_heads ", c.num_key_value_heads);

  if (field(j, "head_dim")) {
    c.head_dim = req_int(j, "head_dim", where);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail(where, ": head_dim is absent and hidden_size ", c.hidden_size,
           " is not a multiple of num_attention_heads ", c.num_attention_heads);
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  check_range(c.head_dim, 2, int64_t{1} << 14, "head_dim", where);
  c.lru_width = opt_int(j, "lru_width", c.hidden_size, where);
  check_range(c.lru_width, 1, int64_t{1} << 16, "lru_width", where);
  if (c.lru_width % c.num_attention_heads != 0)
    fail(where, ": lru_width ", c.lru_width, " is not a multiple of num_attention_heads ",
         c.num_attention_heads, " (the RG-LRU gates are block-diagonal per head)");
  c.attention_window_size = opt_int(j, "attention_window_size", 2048, where);
  check_range(c.attention_window_size, 1, int64_t{1} << 20, "attention_window_size", where);
  c.conv1d_width = opt_int(j, "conv1d_width", 4, where);
  check_range(c.conv1d_width, 1, 64, "conv1d_width", where);

  c.logits_soft_cap = opt_float(j, "logits_soft_cap", 30.0, where);
  c.rms_norm_eps = opt_float(j, "rms_norm_eps", 1e-6, where);
  if (c.rms_norm_eps < 0) fail(where, ": config field 'rms_norm_eps' is negative");
  c.partial_rotary_factor = opt_float(j, "partial_rotary_factor", 0.5, where);
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1))
    fail(where, ": config field 'partial_rotary_factor' = ", c.partial_rotary_factor,
         " is outside (0, 1]");
  c.rope_theta = 10000.0;
  if (field(j, "rope_theta")) {
    c.rope_theta = opt_float(j, "rope_theta", 10000.0, where);
  } else if (const json* rp = field(j, "rope_parameters"); rp && rp->is_object()) {
    c.rope_theta = opt_float(*rp, "rope_theta", 10000.0, where + " rope_parameters");
  }
  if (!(c.rope_theta > 0)) fail(where, ": config field 'rope_theta' must be positive");
  {
    const double rd = static_cast<double>(c.head_dim) * c.partial_rotary_factor;
    if (rd != std::floor(rd) || static_cast<int64_t>(rd) % 2 != 0)
      fail(where, ": head_dim ", c.head_dim, " x partial_rotary_factor ", c.partial_rotary_factor,
           " is not an even number of rotary dims");
  }

  if (const json* ab = field(j, "attention_bias")) {
    if (!ab->is_boolean()) fail(where, ": config field 'attention_bias' must be true or false");
    c.attention_bias = ab->get<bool>();
  }
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    if (const json* act = field(j, key)) {
      const std::string a = act->is_string() ? act->get<std::string>() : act->dump();
      if (a != "gelu_pytorch_tanh" && a != "gelu_tanh" && a != "gelu_new" && a != "gelu_fast")
        fail(where, ": config field '", key, "' = '", a,
             "' is not supported (RecurrentGemma uses gelu_pytorch_tanh)");
    }
  }

  const json* bt = field(j, "block_types");
  const char* bt_key = "block_types";
  if (!bt) {
    bt = field(j, "_block_types");
    bt_key = "_block_types";
  }
  if (!bt) fail(where, ": config field 'block_types' (or '_block_types') is required");
  if (!bt->is_array() || bt->empty())
    fail(where, ": config field '", bt_key, "' must be a non-empty list");
  for (size_t i = 0; i < bt->size(); ++i) {
    const json& e = (*bt)[i];
    const std::string s = e.is_string() ? e.get<std::string>() : e.dump();
    if (s != "recurrent" && s != "attention")
      fail(where, ": config field '", bt_key, "'[", i, "] = '", s,
           "' is an unknown block type (expected 'recurrent' or 'attention')");
    c.block_types.push_back(s);
  }
  c.bos_token_id = static_cast<int32_t>(opt_int(j, "bos_token_id", 2, where));
  c.eos_token_id = static_cast<int32_t>(opt_int(j, "eos_token_id", 1, where));
  c.pad_token_id = static_cast<int32_t>(opt_int(j, "pad_token_id", 0, where));
  return c;
}

json RecurrentGemmaConfig::to_json() const {
  json j;
  j["model_type"] = "recurrent_gemma";
  j["architectures"] = json::array({"RecurrentGemmaForCausalLM"});
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["lru_width"] = lru_width;
  j["attention_window_size"] = attention_window_size;
  j["conv1d_width"] = conv1d_width;
  j["logits_soft_cap"] = logits_soft_cap;
  j["rms_norm_eps"] = rms_norm_eps;
  j["partial_rotary_factor"] = partial_rotary_factor;
  j["rope_theta"] = rope_theta;
  j["attention_bias"] = attention_bias;
  j["block_types"] = block_types;
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["embeddings_scale_by_sqrt_dim"] = true;
  j["tie_word_embeddings"] = true;
  j["bos_token_id"] = bos_token_id;
  j["eos_token_id"] = eos_token_id;
  j["pad_token_id"] = pad_token_id;
  return j;
}

int64_t RecurrentGemmaConfig::rot_dim() const {
  return static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
}

bool RecurrentGemmaConfig::is_attention(int64_t layer) const {
  return block_types[static_cast<size_t>(layer) % block_types.size()] == "attention";
}

}  // namespace cachet

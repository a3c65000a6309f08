// MetaVoice stage configurations (gpt-fast ModelArgs, nanoGPT GPTConfig) and METAVOICE_DIR
// helpers.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cachet/error.h"
#include "cachet/gguf.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/model_files.h"

namespace cachet {

namespace {

// The object holding the fields: j["model_args"] when present, else j itself.
const nlohmann::json& model_args_of(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail(where, ": expected a JSON object with \"model_args\"");
  auto it = j.find("model_args");
  if (it == j.end()) return j;
  if (!it->is_object()) fail(where, ": \"model_args\" is not an object");
  return *it;
}

bool present(const nlohmann::json& a, const char* key) {
  auto it = a.find(key);
  return it != a.end() && !it->is_null();
}

int64_t get_int(const nlohmann::json& a, const char* key, int64_t def, const std::string& where) {
  if (!present(a, key)) return def;
  const auto& v = a.at(key);
  if (const auto n = json_integer(v)) return *n;
  if (v.is_number_unsigned())
    fail(where, ": model_args field '", key, "' = ", v.dump(), " is out of range");
  fail(where, ": model_args field '", key, "' is not an integer");
}

double get_num(const nlohmann::json& a, const char* key, double def, const std::string& where) {
  if (!present(a, key)) return def;
  const auto& v = a.at(key);
  if (!v.is_number()) fail(where, ": model_args field '", key, "' is not a number");
  return v.get<double>();
}

bool get_bool(const nlohmann::json& a, const char* key, bool def, const std::string& where) {
  if (!present(a, key)) return def;
  const auto& v = a.at(key);
  if (!v.is_boolean()) fail(where, ": model_args field '", key, "' is not true/false");
  return v.get<bool>();
}

std::string get_str(const nlohmann::json& a, const char* key, const std::string& def,
                    const std::string& where) {
  if (!present(a, key)) return def;
  const auto& v = a.at(key);
  if (!v.is_string()) fail(where, ": model_args field '", key, "' is not a string");
  return v.get<std::string>();
}

std::vector<int64_t> get_ints(const nlohmann::json& a, const char* key,
                              const std::vector<int64_t>& def, const std::string& where) {
  if (!a.contains(key)) return def;
  const auto& v = a.at(key);
  if (v.is_null()) return {};
  if (!v.is_array()) fail(where, ": model_args field '", key, "' is not a list");
  std::vector<int64_t> out;
  for (const auto& e : v) {
    if (!e.is_number_integer()) fail(where, ": model_args field '", key, "' holds a non-integer");
    out.push_back(e.get<int64_t>());
  }
  return out;
}

void positive(int64_t v, const char* key, const std::string& where) {
  if (v <= 0) fail(where, ": model_args field '", key, "' must be positive (got ", v, ")");
}

// Sizes are capped so that a bad config cannot ask for absurd allocations.
constexpr int64_t kMaxSize = int64_t{1} << 24;

void bounded(int64_t v, const char* key, const std::string& where) {
  positive(v, key, where);
  if (v > kMaxSize) fail(where, ": model_args field '", key, "' is too large (", v, ")");
}

int64_t find_multiple(int64_t n, int64_t k) {
  return n % k == 0 ? n : n + k - n % k;
}

}  // namespace

// ------------------------------------------------------------------ stage 1

MvStage1Args MvStage1Args::from_json(const nlohmann::json& j, const std::string& where) {
  const nlohmann::json& a = model_args_of(j, where);
  MvStage1Args r;
  r.block_size = get_int(a, "block_size", r.block_size, where);
  r.vocab_size = get_int(a, "vocab_size", r.vocab_size, where);
  r.n_layer = get_int(a, "n_layer", r.n_layer, where);
  r.n_head = get_int(a, "n_head", r.n_head, where);
  r.dim = get_int(a, "dim", r.dim, where);
  // gpt-fast's default is -1, i.e. n_head (the released model has no grouped-query attention).
  r.n_local_heads = get_int(a, "n_local_heads", -1, where);
  r.norm_eps = get_num(a, "norm_eps", r.norm_eps, where);
  r.speaker_emb_dim = get_int(a, "speaker_emb_dim", r.speaker_emb_dim, where);
  bounded(r.block_size, "block_size", where);
  bounded(r.vocab_size, "vocab_size", where);
  bounded(r.n_layer, "n_layer", where);
  bounded(r.n_head, "n_head", where);
  bounded(r.dim, "dim", where);
  bounded(r.speaker_emb_dim, "speaker_emb_dim", where);
  if (r.n_local_heads == -1) r.n_local_heads = r.n_head;  // gpt-fast: -1 means n_head
  bounded(r.n_local_heads, "n_local_heads", where);
  // gpt-fast: find_multiple(int(2 * 4 dim / 3), 256) when not given.
  r.intermediate_size = present(a, "intermediate_size") ? get_int(a, "intermediate_size", 0, where)
                                                        : find_multiple(2 * 4 * r.dim / 3, 256);
  bounded(r.intermediate_size, "intermediate_size", where);
  if (r.dim % r.n_head != 0)
    fail(where, ": dim ", r.dim, " is not a multiple of n_head ", r.n_head);
  if (r.n_head % r.n_local_heads != 0)
    fail(where, ": n_head ", r.n_head, " is not a multiple of n_local_heads ", r.n_local_heads);
  if (!(r.norm_eps > 0)) fail(where, ": model_args field 'norm_eps' must be positive");
  return r;
}

nlohmann::json MvStage1Args::to_json() const {
  return {{"model_args",
           {{"block_size", block_size},
            {"vocab_size", vocab_size},
            {"n_layer", n_layer},
            {"n_head", n_head},
            {"dim", dim},
            {"n_local_heads", n_local_heads},
            {"norm_eps", norm_eps},
            {"intermediate_size", intermediate_size},
            {"speaker_emb_dim", speaker_emb_dim}}}};
}

// ------------------------------------------------------------------ stage 2

int64_t MvStage2Args::mlp_hidden() const {
  const int64_t h = 4 * n_embd;
  if (nonlinearity_type != "swiglu") return h;
  const int64_t m = swiglu_multiple_of;
  const int64_t two_thirds = 2 * h / 3;  // int(2 * h / 3)
  return m * ((two_thirds + m - 1) / m);
}

std::vector<int64_t> MvStage2Args::head_vocab_sizes() const {
  return target_vocab_sizes.empty() ? vocab_sizes : target_vocab_sizes;
}

MvStage2Args MvStage2Args::from_json(const nlohmann::json& j, const std::string& where) {
  const nlohmann::json& a = model_args_of(j, where);
  MvStage2Args r;
  r.block_size = get_int(a, "block_size", r.block_size, where);
  r.vocab_sizes = get_ints(a, "vocab_sizes", r.vocab_sizes, where);
  r.target_vocab_sizes = get_ints(a, "target_vocab_sizes", r.target_vocab_sizes, where);
  r.n_layer = get_int(a, "n_layer", r.n_layer, where);
  r.n_head = get_int(a, "n_head", r.n_head, where);
  r.n_embd = get_int(a, "n_embd", r.n_embd, where);
  r.bias = get_bool(a, "bias", r.bias, where);
  r.causal = get_bool(a, "causal", r.causal, where);
  r.norm_type = get_str(a, "norm_type", r.norm_type, where);
  r.rmsnorm_eps = get_num(a, "rmsnorm_eps", 0.0, where);
  r.nonlinearity_type = get_str(a, "nonlinearity_type", r.nonlinearity_type, where);
  r.swiglu_multiple_of = get_int(a, "swiglu_multiple_of", 0, where);
  r.spk_emb_on_text = get_bool(a, "spk_emb_on_text", r.spk_emb_on_text, where);
  r.kv_cache_enabled = get_bool(a, "kv_cache_enabled", r.kv_cache_enabled, where);
  r.speaker_emb_dim = get_int(a, "speaker_emb_dim", r.speaker_emb_dim, where);
  // A causal config without target sizes given means tied heads (the original's default,
  // None); the released defaults above are for the non-causal model.
  if (r.causal && !a.contains("target_vocab_sizes")) r.target_vocab_sizes.clear();

  bounded(r.block_size, "block_size", where);
  bounded(r.n_layer, "n_layer", where);
  bounded(r.n_head, "n_head", where);
  bounded(r.n_embd, "n_embd", where);
  bounded(r.speaker_emb_dim, "speaker_emb_dim", where);
  if (r.vocab_sizes.empty()) fail(where, ": model_args field 'vocab_sizes' is empty");
  if (r.vocab_sizes.size() > 64) fail(where, ": model_args field 'vocab_sizes' is too long");
  if (r.target_vocab_sizes.size() > 64)
    fail(where, ": model_args field 'target_vocab_sizes' is too long");
  for (int64_t v : r.vocab_sizes) bounded(v, "vocab_sizes", where);
  for (int64_t v : r.target_vocab_sizes) bounded(v, "target_vocab_sizes", where);
  if (r.n_embd % r.n_head != 0)
    fail(where, ": n_embd ", r.n_embd, " is not a multiple of n_head ", r.n_head);
  if (!r.target_vocab_sizes.empty() && r.causal)
    fail(where, ": target_vocab_sizes requires causal = false (heads tied otherwise)");
  if (r.target_vocab_sizes.empty() && !r.causal)
    fail(where, ": a non-causal model needs target_vocab_sizes");
  if (!r.causal && !r.spk_emb_on_text)
    fail(where, ": spk_emb_on_text = false is only supported for causal models");
  if (!r.causal && r.kv_cache_enabled)
    fail(where, ": kv_cache_enabled = true is not supported for non-causal models");
  if (r.norm_type == "rmsnorm") {
    if (!(r.rmsnorm_eps > 0)) fail(where, ": norm_type rmsnorm requires rmsnorm_eps > 0");
  } else if (r.norm_type != "layernorm") {
    fail(where, ": unknown norm_type '", r.norm_type, "' (layernorm or rmsnorm)");
  }
  if (r.nonlinearity_type == "swiglu") {
    if (r.swiglu_multiple_of <= 0)
      fail(where, ": nonlinearity_type swiglu requires swiglu_multiple_of > 0");
    bounded(r.swiglu_multiple_of, "swiglu_multiple_of", where);
  } else if (r.nonlinearity_type != "gelu") {
    fail(where, ": unknown nonlinearity_type '", r.nonlinearity_type, "' (gelu or swiglu)");
  }
  return r;
}

nlohmann::json MvStage2Args::to_json() const {
  nlohmann::json a = {{"block_size", block_size},
                      {"vocab_sizes", vocab_sizes},
                      {"n_layer", n_layer},
                      {"n_head", n_head},
                      {"n_embd", n_embd},
                      {"bias", bias},
                      {"causal", causal},
                      {"norm_type", norm_type},
                      {"nonlinearity_type", nonlinearity_type},
                      {"spk_emb_on_text", spk_emb_on_text},
                      {"kv_cache_enabled", kv_cache_enabled},
                      {"speaker_emb_dim", speaker_emb_dim}};
  a["target_vocab_sizes"] =
      target_vocab_sizes.empty() ? nlohmann::json(nullptr) : nlohmann::json(target_vocab_sizes);
  a["rmsnorm_eps"] = rmsnorm_eps > 0 ? nlohmann::json(rmsnorm_eps) : nlohmann::json(nullptr);
  a["swiglu_multiple_of"] =
      swiglu_multiple_of > 0 ? nlohmann::json(swiglu_multiple_of) : nlohmann::json(nullptr);
  return {{"model_args", a}};
}

// ------------------------------------------------------------------ METAVOICE_DIR

std::string mv_stage1_file(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  const fs::path d(dir);
  if (fs::is_regular_file(d / "first_stage.safetensors", ec))
    return (d / "first_stage.safetensors").string();
  if (fs::is_regular_file(d / "first_stage_q4k.gguf", ec))
    return (d / "first_stage_q4k.gguf").string();
  std::vector<std::string> ggufs;
  for (const auto& e : fs::directory_iterator(d, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("first_stage", 0) == 0 && name.size() > 5 &&
        name.compare(name.size() - 5, 5, ".gguf") == 0 && e.is_regular_file(ec))
      ggufs.push_back(e.path().string());
  }
  std::sort(ggufs.begin(), ggufs.end());
  return ggufs.empty() ? "" : ggufs.front();
}

bool is_metavoice_dir(const std::string& path) {
  return !mv_stage1_file(path).empty();
}

nlohmann::json mv_dir_config(const std::string& dir) {
  return mv_dir_config_at(dir).first;
}

std::pair<nlohmann::json, std::string> mv_dir_config_at(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    nlohmann::json j = read_json_file(path);
    if (!j.is_object()) fail(path, ": expected a JSON object");
    return {j, path};
  }
  // A stage-1 GGUF written by `cachet convert` carries the directory's configs
  const std::string s1 = mv_stage1_file(dir);
  if (s1.size() > 5 && s1.compare(s1.size() - 5, 5, ".gguf") == 0) {
    const auto g = GgufFile::open(s1);
    if (const GgufValue* v = g->find("cachet.hf_config"); v && v->type() == GgufType::STRING) {
      const std::string where = s1 + " (cachet.hf_config)";
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(v->as_string());
      } catch (const nlohmann::json::exception& e) {
        fail(where, ": not valid JSON: ", e.what());
      }
      if (!j.is_object()) fail(where, ": expected a JSON object");
      return {j, where};
    }
  }
  return {nlohmann::json::object(), path};
}

namespace {
MvStage1Args stage1_from(const nlohmann::json& cfg, const std::string& from) {
  const std::string where = from + " first_stage";
  auto it = cfg.find("first_stage");
  if (it == cfg.end() || it->is_null()) return MvStage1Args{};
  return MvStage1Args::from_json(*it, where);
}
MvStage2Args stage2_from(const nlohmann::json& cfg, const std::string& from) {
  const std::string where = from + " second_stage";
  auto it = cfg.find("second_stage");
  if (it == cfg.end() || it->is_null()) return MvStage2Args{};
  return MvStage2Args::from_json(*it, where);
}
}  // namespace

MvStage1Args mv_stage1_args(const std::string& dir) {
  const auto [cfg, from] = mv_dir_config_at(dir);
  return stage1_from(cfg, from);
}
MvStage2Args mv_stage2_args(const std::string& dir) {
  const auto [cfg, from] = mv_dir_config_at(dir);
  return stage2_from(cfg, from);
}

}  // namespace cachet

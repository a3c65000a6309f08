// cachet convert HF_DIR -o OUT.gguf [--type T]   and   cachet quantize IN.gguf OUT.gguf TYPE
// cachet convert METAVOICE_DIR -o first_stage_q4k.gguf [--type T]: the MetaVoice stage-1 GPT.
// cachet convert speaker_encoder.pt -o speaker_encoder.safetensors [--key model_state]: the
// tensors of a PyTorch checkpoint (under key) with their names, shapes and dtypes.
//
// Matrices (2-D tensors) are stored in the requested type; a matrix whose rows are not a whole
// number of blocks falls back to Q8_0, then F16. Vectors, conv taps, biases and the 3-D RG-LRU
// gates stay F32. The HF config travels in "cachet.hf_config" and the tokenizer (when the directory
// has one) in the keys described in include/cachet/tokenizer.h, so the GGUF file is self-contained.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cachet/error.h"
#include "cachet/file.h"
#include "cachet/gguf.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/model_files.h"
#include "cachet/quant.h"
#include "cachet/threadpool.h"
#include "cachet/tokenizer.h"
#include "cachet/torch_checkpoint.h"
#include "cli.h"
#include "random_model.h"

namespace cachet::cli {
namespace {

class Progress {
 public:
  Progress(uint64_t total, bool enabled) : total_(total), enabled_(enabled && isatty(2)) {}
  void add(uint64_t n) {
    done_ += n;
    if (!enabled_) return;
    const int pct = total_ ? static_cast<int>(100.0 * done_ / total_) : 100;
    if (pct == last_) return;
    last_ = pct;
    const int width = 40, filled = pct * width / 100;
    std::fprintf(stderr, "\r[%.*s%*s] %3d%%", filled, "########################################",
                 width - filled, "", pct);
    if (done_ >= total_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  uint64_t total_, done_ = 0;
  bool enabled_;
  int last_ = -1;
};

DType parse_type(const std::string& s) {
  auto t = dtype_from_name(s);
  if (!t || !(is_weight_type(*t) || *t == DType::F32) || *t == DType::Q8_K || *t == DType::Q8_1)
    fail("unknown or unsupported weight type '", s,
         "' (use F32, F16, BF16, Q8_0, Q6_K, Q5_K, Q5_1, Q5_0, Q4_K, Q4_1, Q4_0, Q3_K, Q2_K)");
  return *t;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Matrices take the type asked for; vectors, conv taps, the 3-D RG-LRU gates and every bias
// (the RG-LRU gate biases are [heads, width] but added, not multiplied) stay F32.
DType target_type(const std::string& name, const Tensor& t, DType want) {
  if (t.ndim() != 2 || t.cols() < 2 || t.rows() < 2) return DType::F32;
  if (ends_with(name, "bias")) return DType::F32;
  return matrix_type_for(want, t.cols());
}

// Adds every tensor of files to w, converted to its target type, streaming row chunks.
void add_converted_tensors(GgufWriter& w, const ModelFiles& files, DType want, ThreadPool& pool,
                           Progress& progress) {
  for (const auto& [name, src] : files.tensors) {
    CACHET_CHECK(src.contiguous(), files.path, ": tensor '", name, "' is not contiguous");
    CACHET_CHECK(is_weight_type(src.dtype) || src.dtype == DType::F32, files.path, ": tensor '",
                 name, "' has type ", dtype_name(src.dtype), ", which cannot be converted");
    const DType dst = target_type(name, src, want);
    if (dst == src.dtype) {
      w.add_tensor(name, src);
      progress.add(src.nbytes);
      continue;
    }
    const Tensor* sp = &src;
    w.add_tensor(name, dst, src.shape, [sp, dst, &pool, &progress](const GgufWriter::Sink& sink) {
      const Tensor& s = *sp;
      const int64_t rows = s.shape.empty() ? 1 : s.rows(), cols = s.shape.empty() ? 1 : s.cols();
      const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 22) / std::max<int64_t>(cols, 1));
      std::vector<float> f(chunk * cols);
      std::vector<uint8_t> q(row_bytes(dst, cols) * chunk);
      const size_t src_row = row_bytes(s.dtype, cols);
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = std::min(chunk, rows - r0);
        pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r)
            dequantize_row(s.dtype, s.bytes() + (r0 + r) * src_row, f.data() + r * cols, cols);
        });
        quantize_matrix(dst, f.data(), q.data(), n, cols, &pool);
        sink(q.data(), row_bytes(dst, cols) * n);
        progress.add(src_row * n);
      }
    });
  }
}

// What a run of add_converted_tensors stored the matrices as: "Q4_K", or "Q4_K (3 in Q8_0: ...)"
// when some fell back because their rows are not whole blocks of the type asked for, or
// "Q8_0 (all 40: ...)" when every one did.
std::string matrix_types(const ModelFiles& files, DType want) {
  std::map<DType, int> fallback;
  int as_asked = 0;
  for (const auto& [name, t] : files.tensors) {
    const DType dst = target_type(name, t, want);
    if (t.ndim() != 2 || dst == DType::F32) continue;
    if (dst == want)
      ++as_asked;
    else
      ++fallback[dst];
  }
  const std::string why =
      ": their rows are not whole " + std::string(dtype_name(want)) + " blocks)";
  if (fallback.empty()) return std::string(dtype_name(want));
  if (as_asked == 0 && fallback.size() == 1)
    return std::string(dtype_name(fallback.begin()->first)) + " (all " +
           std::to_string(fallback.begin()->second) + why;
  std::string s = as_asked > 0 ? std::string(dtype_name(want)) + " (" : "(";
  for (const auto& [type, n] : fallback)
    s += (s.back() == '(' ? "" : ", ") + std::to_string(n) + " in " + std::string(dtype_name(type));
  return s + why;
}

// The name a converted file carries (general.name): the model's folder, without the rest of
// the path it was converted from
std::string model_name_of(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::path(path);
  if (!fs::is_directory(p, ec)) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() ? std::string("model") : name;
}

uint64_t total_bytes(const ModelFiles& files) {
  uint64_t n = 0;
  for (const auto& [name, t] : files.tensors) n += t.nbytes;
  return n;
}

// The stage-1 GPT of a METAVOICE_DIR (first_stage.safetensors) to GGUF, tensor names kept (as
// candle's quantized first_stage_q4k.gguf has them). The directory's effective stage configs
// travel in "cachet.hf_config".
int run_convert_metavoice(const std::string& dir, const std::string& out,
                          const std::string& type_name, bool progress_bar) {
  const std::string src = mv_stage1_file(dir);
  ModelFiles files = ModelFiles::open(src);
  CACHET_CHECK(
      files.format != ModelFiles::Format::Gguf, src,
      ": the stage-1 weights are already GGUF; use `cachet quantize IN.gguf OUT.gguf TYPE`");
  const MvStage1Args a1 = mv_stage1_args(dir);
  const MvStage2Args a2 = mv_stage2_args(dir);
  DType want = DType::F32;
  if (!type_name.empty()) {
    want = parse_type(type_name);
  } else {
    const Tensor* emb = files.find("tok_embeddings.weight");
    if (!emb) emb = files.find("_orig_mod.tok_embeddings.weight");
    CACHET_CHECK(emb, src, ": missing tensor 'tok_embeddings.weight' (not a MetaVoice stage 1)");
    want = emb->dtype;
  }
  GgufWriter w;
  w.add_string("general.architecture", "metavoice_stage1");
  w.add_string("general.name", model_name_of(dir));
  nlohmann::json cfg = {{"first_stage", a1.to_json()}, {"second_stage", a2.to_json()}};
  w.add_string("cachet.hf_config", cfg.dump());
  w.add_string("cachet.weight_type", std::string(dtype_name(want)));
  Progress progress(total_bytes(files), progress_bar);
  add_converted_tensors(w, files, want, default_pool(), progress);
  w.write(out);
  std::fprintf(stderr,
               "wrote %s (%zu stage-1 tensors, matrices in %s); a METAVOICE_DIR uses it as "
               "first_stage_q4k.gguf or first_stage*.gguf when it has no first_stage.safetensors\n",
               out.c_str(), files.tensors.size(), matrix_types(files, want).c_str());
  return 0;
}

int run_convert_torch(const std::string& in, const std::string& out, const std::string& key,
                      const std::string& type_name) {
  CACHET_CHECK(type_name.empty(), in,
               ": --type does not apply to a PyTorch checkpoint (its tensors keep their dtypes)");
  CACHET_CHECK(ends_with(out, ".safetensors"), out,
               ": a PyTorch checkpoint converts to safetensors; name the output *.safetensors");
  convert_torch_checkpoint(in, key, out);
  std::fprintf(stderr, "wrote %s (the tensors of %s%s%s)\n", out.c_str(), in.c_str(),
               key.empty() ? "" : " under ", key.c_str());
  return 0;
}

int run_convert(const std::string& in, const std::string& out, const std::string& type_name,
                bool progress_bar, const std::string& key) {
  check_output(out, {in}, /*model_siblings=*/true);
  if (ends_with(in, ".pt") || ends_with(in, ".pth"))
    return run_convert_torch(in, out, key, type_name);
  if (is_metavoice_dir(in)) return run_convert_metavoice(in, out, type_name, progress_bar);
  ModelFiles files = ModelFiles::open(in);
  CACHET_CHECK(files.format != ModelFiles::Format::Gguf, in,
               ": already a GGUF file; use `cachet quantize IN.gguf OUT.gguf TYPE`");
  DType want = DType::F32;
  if (!type_name.empty()) {
    want = parse_type(type_name);
  } else if (auto it = files.tensors.find("model.embed_tokens.weight"); it != files.tensors.end()) {
    want = it->second.dtype;  // keep the checkpoint's own precision
  }
  CACHET_CHECK(!files.config.empty(), in, ": no config.json");
  ThreadPool& pool = default_pool();
  GgufWriter w;
  const std::string arch = files.config.value("model_type", std::string("unknown"));
  w.add_string("general.architecture", arch);
  w.add_string("general.name", model_name_of(in));
  w.add_string("cachet.hf_config", files.config.dump());
  w.add_string("cachet.weight_type", std::string(dtype_name(want)));
  if (!files.tokenizer_model.empty())
    write_tokenizer_to_gguf(w, read_file(files.tokenizer_model), files.tokenizer_model);
  Progress progress(total_bytes(files), progress_bar);
  add_converted_tensors(w, files, want, pool, progress);
  w.write(out);
  std::fprintf(stderr, "wrote %s (%zu tensors, matrices in %s)\n", out.c_str(),
               files.tensors.size(), matrix_types(files, want).c_str());
  return 0;
}

int run_quantize(const std::string& in, const std::string& out, const std::string& type_name,
                 bool progress_bar) {
  const DType want = parse_type(type_name);
  check_output(out, {in}, /*model_siblings=*/true);
  ModelFiles files = ModelFiles::open(in);
  CACHET_CHECK(files.format == ModelFiles::Format::Gguf && files.gguf, in,
               ": not a GGUF file; use `cachet convert HF_DIR -o OUT.gguf --type T` first");
  GgufWriter w(files.gguf->alignment());
  for (const auto& [key, value] : files.gguf->metadata()) {
    if (key == "cachet.weight_type" || key == "general.file_type") continue;
    if (key == "general.alignment") continue;  // written by the writer
    w.add(key, value);
  }
  w.add_string("cachet.weight_type", std::string(dtype_name(want)));
  // Quantized matrices stored again in another block type lose precision a second time
  std::map<DType, int> requantized;
  for (const auto& [name, t] : files.tensors) {
    const DType dst = target_type(name, t, want);
    if (dtype_info(t.dtype).quantized && dtype_info(dst).quantized && dst != t.dtype)
      ++requantized[t.dtype];
  }
  for (const auto& [type, n] : requantized)
    std::fprintf(stderr,
                 "note: %d matrices are already quantized (%s); requantizing them to %s loses "
                 "precision\n",
                 n, std::string(dtype_name(type)).c_str(), std::string(dtype_name(want)).c_str());
  Progress progress(total_bytes(files), progress_bar);
  add_converted_tensors(w, files, want, default_pool(), progress);
  w.write(out);
  std::fprintf(stderr, "wrote %s (%zu tensors, matrices in %s)\n", out.c_str(),
               files.tensors.size(), matrix_types(files, want).c_str());
  return 0;
}

const Register reg_convert{
    {"convert", "Convert a Hugging Face model directory or a METAVOICE_DIR to GGUF",
     [](CLI::App* sub) -> std::function<int()> {
       auto in = std::make_shared<std::string>();
       auto out = std::make_shared<std::string>();
       auto type = std::make_shared<std::string>();
       auto quiet = std::make_shared<bool>(false);
       auto key = std::make_shared<std::string>("model_state");
       sub->add_option("input", *in,
                       "HF model directory, METAVOICE_DIR or a PyTorch checkpoint (.pt)")
           ->required();
       sub->add_option("-o,--output", *out, "Output GGUF file (safetensors for .pt input)")
           ->required();
       sub->add_option("--type", *type, "Weight type of the matrices (default: as stored)");
       sub->add_option("--key", *key,
                       "Checkpoint entry holding the tensors, for .pt input (default "
                       "model_state; \"\": all)");
       sub->add_flag("-q,--quiet", *quiet, "No progress bar");
       int* threads = add_threads_option(sub);
       return [=] {
         apply_threads(*threads);
         return run_convert(*in, *out, *type, !*quiet, *key);
       };
     }}};

const Register reg_quantize{{"quantize", "Re-quantize a GGUF model to another weight type",
                             [](CLI::App* sub) -> std::function<int()> {
                               auto in = std::make_shared<std::string>();
                               auto out = std::make_shared<std::string>();
                               auto type = std::make_shared<std::string>();
                               auto quiet = std::make_shared<bool>(false);
                               sub->add_option("input", *in, "Input GGUF file")->required();
                               sub->add_option("output", *out, "Output GGUF file")->required();
                               sub->add_option("type", *type, "Weight type, e.g. Q4_K")->required();
                               sub->add_flag("-q,--quiet", *quiet, "No progress bar");
                               int* threads = add_threads_option(sub);
                               return [=] {
                                 apply_threads(*threads);
                                 return run_quantize(*in, *out, *type, !*quiet);
                               };
                             }}};

const Register reg_random{
    {"random-model", "Write a random-weight model with real shapes",
     [](CLI::App* sub) -> std::function<int()> {
       auto preset = std::make_shared<std::string>();
       auto out = std::make_shared<std::string>();
       auto type = std::make_shared<std::string>("Q4_K");
       auto seed = std::make_shared<std::string>("1234");
       std::string names;
       for (const auto& p : random_presets()) names += " " + p;
       sub->add_option("preset", *preset, "One of:" + names)->required();
       sub->add_option("-o,--output", *out, "Output GGUF file")->required();
       sub->add_option("--type", *type, "Weight type of the matrices")->capture_default_str();
       sub->add_option("--seed", *seed, "Random seed")->capture_default_str();
       int* threads = add_threads_option(sub);
       return [=] {
         apply_threads(*threads);
         auto spec = random_model_spec(*preset, parse_type(*type));
         write_random_model(spec, seed_from(*seed), *out, default_pool());
         std::fprintf(stderr, "wrote %s\n", out->c_str());
         return 0;
       };
     }}};

}  // namespace
}  // namespace cachet::cli

// Model benchmark behind `cachet bench -m MODEL` / `cachet bench --random NAME --type T`.
#pragma once
#include <string>

namespace cachet::cli {

struct BenchModelArgs {
  std::string model;        // path of a GGUF file or HF directory ("" when random)
  std::string random_name;  // preset for a random-weight model built in memory
  std::string type = "Q4_K";
  int threads = 0;
  int prompt = 512;         // prefill length
};

int bench_model(const BenchModelArgs& args);

}  // namespace cachet::cli

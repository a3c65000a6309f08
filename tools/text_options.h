// Options shared by the text generation commands (run, chat): sampling, stop strings, seed.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cachet/sampler.h"

namespace cachet::cli {

struct TextGenOptions {
  std::string model;
  SamplingParams sampling;
  int64_t max_tokens = 256;
  std::vector<std::string> stop;
  std::string seed;  // empty: from the clock
  bool verbose = false;
  bool ignore_eos = false;
  int* threads = nullptr;
};

// Adds -m, -n, --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,
// --presence-penalty, --frequency-penalty, --stop, --ignore-eos, --seed, -v and -t to sub.
void add_text_gen_options(CLI::App* sub, TextGenOptions& o);

// Validates the sampling parameters and the stop strings and fixes the seed; returns it.
uint64_t finalize_text_gen_options(TextGenOptions& o);

}  // namespace cachet::cli

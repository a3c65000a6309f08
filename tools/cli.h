// Subcommand registry of the cachet tool: each tools/cmd_*.cpp registers its subcommands.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace cachet::cli {

struct Command {
  std::string name;
  std::string help;
  // Adds options to sub and returns the action to run when the subcommand is chosen.
  std::function<std::function<int()>(CLI::App* sub)> setup;
};

std::vector<Command>& registry();

struct Register {
  explicit Register(Command c) { registry().push_back(std::move(c)); }
};

// Adds "-t,--threads" and returns the storage; apply_threads() sizes the default pool (0 or less:
// one thread per core; more than kMaxThreads is an error, more than the cores a note).
constexpr int kMaxThreads = 1024;
int* add_threads_option(CLI::App* sub);
void apply_threads(int n);

// Before any work: an output path that can be written (not empty, not a directory) and that is
// none of the inputs' files, so that a command never replaces what it reads: an input itself,
// or a file below an input directory (through symlinked folders too). With model_siblings (a
// model to convert), beside a .safetensors or .json input also the .safetensors, .json and
// .model files an HF checkpoint reads with it. Empty inputs are skipped.
void check_output(const std::string& out, std::initializer_list<std::string> inputs,
                  bool model_siblings = false);

// Ctrl-C while text is generated: the first one asks the generation to stop (interrupted()
// turns true), a second one ends the process with status 130 at once. While one of these is
// alive; outside it Ctrl-C ends the process as usual.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  static bool interrupted();
  static void clear();
};

// The text of an input file of a command (a prompt, a text to score, ids): "-" reads standard
// input.
std::string read_input(const std::string& path, std::string_view what);

// The seed of "--seed TEXT": a whole number from 0 to 2^64 - 1 (anything else is an error), or
// one from the clock when TEXT is empty or -1.
uint64_t seed_from(const std::string& text);

}  // namespace cachet::cli

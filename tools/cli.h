// Subcommand registry of the cachet tool: each tools/cmd_*.cpp registers its subcommands.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
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

// Adds "-t,--threads" and returns the storage; apply_threads() sizes the default pool.
int* add_threads_option(CLI::App* sub);
void apply_threads(int n);

}  // namespace cachet::cli

// cachet: command-line entry point.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>

#include "cachet/error.h"
#include "cachet/threadpool.h"
#include "cli.h"

namespace cachet::cli {

std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}

int* add_threads_option(CLI::App* sub) {
  auto* n = new int(0);  // lives as long as the process
  sub->add_option("-t,--threads", *n, "Worker threads (default: all cores)");
  return n;
}

void apply_threads(int n) {
  set_default_threads(n);
}

}  // namespace cachet::cli

int main(int argc, char** argv) {
  using namespace cachet::cli;
  CLI::App app{"cachet: fast CPU inference for RecurrentGemma and MetaVoice"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cachet 0.1.0");
  std::map<CLI::App*, std::function<int()>> actions;
  auto& cmds = registry();
  std::sort(cmds.begin(), cmds.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  for (auto& c : cmds) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    actions[sub] = c.setup(sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, action] : actions)
      if (sub->parsed()) return action();
  } catch (const cachet::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "cachet: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "cachet: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

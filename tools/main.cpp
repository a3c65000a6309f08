// cachet: command-line entry point.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "cachet/error.h"
#include "cachet/file.h"
#include "cachet/threadpool.h"
#include "cli.h"
#include "default_model.h"

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
  CACHET_CHECK(n <= kMaxThreads, "-t ", n, ": at most ", kMaxThreads, " threads");
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (n > cores && cores > 0)
    std::fprintf(stderr,
                 "note: -t %d is more threads than the %d this machine runs at once; the pool's "
                 "threads wait for each other at every step, so more than that is slower\n",
                 n, cores);
  set_default_threads(n);
}

void check_output(const std::string& out, std::initializer_list<std::string> inputs,
                  bool model_siblings) {
  namespace fs = std::filesystem;
  CACHET_CHECK(!out.empty(), "the output path is empty");
  std::error_code ec;
  CACHET_CHECK(!fs::is_directory(out, ec), out, ": is a directory; name the output file");
  struct stat os {};
  if (::stat(out.c_str(), &os) != 0) return;  // a new file replaces nothing
  const auto same = [&](const fs::path& p) {
    struct stat ps {};
    return ::stat(p.c_str(), &ps) == 0 && ps.st_dev == os.st_dev && ps.st_ino == os.st_ino;
  };
  for (const std::string& in : inputs) {
    if (in.empty()) continue;
    const auto refuse = [&](const fs::path& p) {
      fail(out, ": is ",
           p.string() == in ? "an input" : "a file of the input " + in + " (" + p.string() + ")",
           "; write the output to another path");
    };
    if (fs::is_directory(in, ec)) {
      // Every file below it, through symlinked folders too (each folder once, 8 levels deep)
      std::set<std::pair<dev_t, ino_t>> seen;
      std::vector<std::pair<fs::path, int>> todo{{fs::path(in), 0}};
      while (!todo.empty()) {
        const auto [dir, depth] = todo.back();
        todo.pop_back();
        struct stat ds {};
        if (::stat(dir.c_str(), &ds) != 0 || !seen.insert({ds.st_dev, ds.st_ino}).second) continue;
        std::error_code e;
        for (auto it =
                 fs::directory_iterator(dir, fs::directory_options::skip_permission_denied, e);
             !e && it != fs::directory_iterator(); it.increment(e)) {
          if (same(it->path())) refuse(it->path());
          std::error_code e2;
          if (depth < 8 && fs::is_directory(it->path(), e2))
            todo.push_back({it->path(), depth + 1});
        }
      }
      continue;
    }
    if (same(in)) refuse(in);
    // An HF checkpoint file reads its config, index, shards and tokenizer beside it
    const std::string ext = fs::path(in).extension().string();
    if (!model_siblings || (ext != ".safetensors" && ext != ".json")) continue;
    const fs::path dir = fs::path(in).has_parent_path() ? fs::path(in).parent_path() : ".";
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      const std::string e = it->path().extension().string();
      if ((e == ".safetensors" || e == ".json" || e == ".model") && same(it->path()))
        refuse(it->path());
    }
  }
}

namespace {
volatile std::sig_atomic_t g_interrupts = 0;
struct sigaction g_old_sigint;

extern "C" void on_sigint(int) {
  if (g_interrupts > 0) _exit(130);  // a second Ctrl-C: now
  g_interrupts = 1;
}
}  // namespace

InterruptGuard::InterruptGuard() {
  g_interrupts = 0;
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read at a prompt ends, as Ctrl-C ends it there
  sigaction(SIGINT, &sa, &g_old_sigint);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &g_old_sigint, nullptr);
}

bool InterruptGuard::interrupted() {
  return g_interrupts > 0;
}

void InterruptGuard::clear() {
  g_interrupts = 0;
}

std::string read_input(const std::string& path, std::string_view what) {
  if (path != "-") return read_file(path, what);
  std::ostringstream os;
  os << std::cin.rdbuf();
  CACHET_CHECK(!std::cin.bad(), "standard input: read error (", what, ")");
  return os.str();
}

uint64_t seed_from(const std::string& text) {
  if (text.empty() || text == "-1") {  // -1: from the clock, as llama.cpp takes it
    std::random_device rd;
    const auto now =
        static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
    return (now ^ (static_cast<uint64_t>(rd()) << 32)) >> 1;
  }
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  CACHET_CHECK(ec != std::errc::result_out_of_range, "--seed ", text,
               ": larger than the largest seed, 18446744073709551615");
  CACHET_CHECK(ec == std::errc() && p == end, "--seed ", text,
               ": give a whole number from 0 to 18446744073709551615 (or -1: from the clock)");
  return v;
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
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "cachet: error: %s\n", name_default_model(e.what()).c_str());
    return 1;
  }
  return 0;
}

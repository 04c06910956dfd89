// The zerojit command-line tool.
//
// Exit codes: 0 ok; 1 runtime JIT in monitor error mode; 2 usage or bad config; 3 compile
// failure.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "examples/scale_add.hpp"
#include "zerojit/zerojit.hpp"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;
constexpr int kExitCompileFailure = 3;

struct WarmupCommand {
  std::string arch = "sm_90a";
  int jobs = 0;
  bool compile_only = false;
  bool json = false;
};

int run_warmup(const WarmupCommand& command) {
  zerojit::WarmupRegistry registry;
  zerojit::examples::register_examples(registry);
  zerojit::WarmupOptions options;
  options.arch = command.arch;
  options.jobs = command.jobs;
  options.compile_only = command.compile_only;
  if (command.json) options.progress = zerojit::ProgressStyle::none;
  const zerojit::WarmupReport report = registry.warmup(options);
  if (command.json) {
    std::cout << report.to_json() << "\n";
  } else {
    for (const auto& key : report.keys) {
      std::printf("%-22s %-34s %-9s %8.3f s\n", key.kernel.c_str(), key.key.c_str(),
                  key.error.empty() ? std::string(zerojit::to_string(key.origin)).c_str()
                                    : "FAILED",
                  key.seconds);
    }
    std::printf("%s\n", report.summary_line().c_str());
    if (report.devices.empty()) {
      std::printf("compiled for %s only; loaded nothing (%s)\n", report.archs.front().c_str(),
                  command.compile_only ? "--compile-only" : "no GPU found");
    }
    for (const auto& key : report.keys) {
      if (!key.error.empty()) std::fprintf(stderr, "error: %s\n", key.error.c_str());
    }
  }
  return report.ok() ? kExitOk : kExitCompileFailure;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zerojit: compile every kernel specialization before serving, and prove that "
               "nothing compiles afterwards"};
  app.require_subcommand(1);
  WarmupCommand warmup;
  CLI::App* warmup_app =
      app.add_subcommand("warmup", "Compile (and load on each GPU) the built-in kernel set");
  warmup_app->add_option("--arch", warmup.arch, "Target arch when nothing is loaded")
      ->capture_default_str();
  warmup_app->add_option("--jobs", warmup.jobs, "Parallel compile jobs (0: one per core)");
  warmup_app->add_flag("--compile-only", warmup.compile_only, "Compile only; load nothing");
  warmup_app->add_flag("--json", warmup.json, "Machine-readable output");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? kExitOk : kExitUsage;
  }
  try {
    if (*warmup_app) return run_warmup(warmup);
  } catch (const zerojit::Error& error) {
    std::fprintf(stderr, "zerojit: %s\n", error.what());
    return kExitUsage;
  }
  return kExitOk;
}

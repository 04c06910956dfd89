// The zerojit command-line tool: warm a DSv4 configuration's kernels (`warmup`), print its
// manifest (`keys`), prove that serving compiles nothing (`run`), manage the compile cache
// (`cache`). docs/TOOL.md describes the commands.
//
// Exit codes: 0 ok; 1 runtime JIT in monitor error mode; 2 usage or bad configuration;
// 3 compile failure; 4 `cache verify` found bad entries; 5 any other failure (a CUDA error,
// out of device memory, a bug).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cache_command.hpp"
#include "dsv4/family.hpp"
#include "exit_codes.hpp"
#include "run_command.hpp"
#include "terminal.hpp"
#include "warmup_command.hpp"
#include "zerojit/zerojit.hpp"

namespace {

using namespace zerojit::tool;

// Reports a failure on standard error (and as JSON on standard output when asked for) and
// returns its exit code.
int report(const ToolError& error, bool json) {
  print_error(error.message, error.hint);
  if (json) {
    nlohmann::json document = {{"ok", false},
                               {"exit_code", error.exit_code},
                               {"error", error.message},
                               {"hint", error.hint}};
    if (!error.json_details.empty()) document.update(nlohmann::json::parse(error.json_details));
    std::cout << document.dump() << "\n";
  }
  return error.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "zerojit: compile every kernel specialization before serving, and prove that "
      "nothing compiles afterwards"};
  app.require_subcommand(1);
  WarmupCommand warmup;
  KeysCommand keys;
  RunCommand run;
  CLI::App* warmup_app = add_warmup_command(app, warmup);
  CLI::App* keys_app = add_keys_command(app, keys);
  CLI::App* run_app = add_run_command(app, run);
  CacheCommandContext cache;
  // `cache explain` explains the manifest plain `zerojit warmup` compiles.
  cache.manifest = [] {
    zerojit::WarmupRegistry registry;
    zerojit::dsv4::AttentionKernels(zerojit::dsv4::default_config()).register_warmup(registry);
    return registry.manifest();
  };
  add_cache_commands(app, cache);
  app.footer(
      "Exit codes: 0 ok, 1 runtime JIT (monitor error mode), 2 usage or bad configuration, "
      "3 compile failure, 4 bad cache entries (cache verify), 5 other failure.\n"
      "Run `zerojit <command> --help` for a command's options; docs/TOOL.md has examples.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (cache.exit_code) return *cache.exit_code;
  const bool json = warmup.json || keys.json || run.json;
  try {
    if (*warmup_app) return run_warmup(warmup);
    if (*keys_app) return run_keys(keys);
    if (*run_app) return run_run(run);
  } catch (const ToolError& error) {
    return report(error, json);
  } catch (const zerojit::dsv4::ConfigError& error) {
    return report({kExitUsage, error.what(),
                   "fix the option or the config.json field named above; `zerojit <command> "
                   "--help` lists the options and their accepted values"},
                  json);
  } catch (const zerojit::RuntimeJitError& error) {
    return report({kExitRuntimeJit, error.what(),
                   "widen the warmup space of " + error.kernel() + " to cover this call"},
                  json);
  } catch (const zerojit::CompileError& error) {
    return report({kExitCompileFailure, error.what(), "read the NVRTC log above"}, json);
  } catch (const zerojit::UnavailableError& error) {
    return report({kExitFailure, error.what(),
                   "install what is missing (the CUDA driver for GPUs; the CUDA toolkit's NVRTC "
                   "for compiling, found through CUDA_HOME) or run where it is"},
                  json);
  } catch (const std::exception& error) {
    return report({kExitFailure, error.what(),
                   "if this looks like a bug, report it with the command line that caused it"},
                  json);
  }
  return kExitOk;
}

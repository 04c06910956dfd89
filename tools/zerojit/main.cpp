// The zerojit command-line tool: warm a DSv4 configuration's kernels (`warmup`), print its
// manifest (`keys`), prove that serving compiles nothing (`run`), manage the compile cache
// (`cache`). docs/TOOL.md describes the commands.
//
// Exit codes: 0 ok; 1 runtime JIT in monitor error mode; 2 usage or bad configuration;
// 3 compile failure; 4 `cache verify` found bad entries; 5 any other failure (a CUDA error,
// out of device memory, a missing NVRTC or driver, a bug).
#include <cstdio>
#include <string>
#include <vector>

#include "cache_command.hpp"
#include "command_line.hpp"
#include "dsv4/family.hpp"
#include "examples/examples.hpp"
#include "exit_codes.hpp"
#include "json_output.hpp"
#include "option_values.hpp"
#include "run_command.hpp"
#include "terminal.hpp"
#include "version_command.hpp"
#include "warmup_command.hpp"
#include "zerojit/zerojit.hpp"

namespace {

using namespace zerojit::tool;

// Reports a failure on standard error (and as the JSON failure document on standard output
// when asked for) and returns its exit code.
int report(const ToolError& error, const CommandLine& line) {
  print_error(error.message, error.hint);
  if (line.json) print_json(failure_document(line.name, error));
  return error.exit_code;
}

int execute(const CommandLine& line) {
  switch (line.command) {
    case Command::version:
      return run_version(line.json);
    case Command::warmup:
      return run_warmup(line.warmup);
    case Command::keys:
      return run_keys(line.keys);
    case Command::run:
      return run_run(line.run);
    case Command::cache: {
      CacheCommandContext context;
      // `cache explain` explains the manifest plain `zerojit warmup` compiles.
      context.manifest = [] {
        zerojit::WarmupRegistry registry;
        zerojit::dsv4::AttentionKernels(zerojit::dsv4::default_config()).register_warmup(registry);
        return registry.manifest();
      };
      context.examples_manifest = [] {
        zerojit::WarmupRegistry registry;
        zerojit::examples::register_examples(registry);
        return registry.manifest();
      };
      return run_cache_command(line.cache, context);
    }
    case Command::none:
      break;
  }
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> arguments(argv + 1, argv + argc);
  const CommandLine line = parse_command_line(arguments);
  if (!line.help.empty()) {
    std::fputs(line.help.c_str(), stdout);
    return kExitOk;
  }
  if (line.error) return report(*line.error, line);
  try {
    return execute(line);
  } catch (const ToolError& error) {
    return report(error, line);
  } catch (const zerojit::dsv4::ConfigError& error) {
    return report({kExitUsage, error.what(),
                   "fix the option or the config.json field named above; " + see_help(line.name) +
                       " for the options and their accepted values"},
                  line);
  } catch (const zerojit::RuntimeJitError& error) {
    return report({kExitRuntimeJit, error.what(),
                   "widen the warmup space of " + error.kernel() + " to cover this call"},
                  line);
  } catch (const zerojit::CompileError& error) {
    return report({kExitCompileFailure, error.what(), "read the NVRTC log above"}, line);
  } catch (const zerojit::UnavailableError& error) {
    return report({kExitFailure, error.what(),
                   "install what is missing (the CUDA driver for GPUs; the CUDA toolkit's NVRTC "
                   "for compiling, found through CUDA_HOME); `zerojit --version` says what was "
                   "found"},
                  line);
  } catch (const std::exception& error) {
    return report({kExitFailure, error.what(),
                   "if this looks like a bug, report it with the command line that caused it"},
                  line);
  }
}

// run_cli (zerojit/tool.hpp): the zerojit tool's commands for any families. The `zerojit`
// binary is main.cpp passing the DSv4 and example families; a project passes its own.
//
// Exit codes: 0 ok; 1 runtime JIT in monitor error mode; 2 usage or bad configuration;
// 3 compile failure; 4 `cache verify` found bad entries; 5 any other failure (a CUDA error,
// out of device memory, a missing NVRTC or driver, a bug).
#include "zerojit/tool.hpp"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cache_command.hpp"
#include "command_line.hpp"
#include "exit_codes.hpp"
#include "json_output.hpp"
#include "option_values.hpp"
#include "terminal.hpp"
#include "version_command.hpp"
#include "warmup_command.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::tool {
namespace {

// Reports a failure on standard error (and as the JSON failure document on standard output
// when asked for) and returns its exit code.
int report(const ToolError& error, const CommandLine& line) {
  print_error(error.message, error.hint);
  if (line.json) print_json(failure_document(line.name, error));
  return error.exit_code;
}

int execute(CommandLine& line) {
  switch (line.command) {
    case Command::version:
      return run_version(line.json);
    case Command::warmup:
      return run_warmup(line.warmup);
    case Command::keys:
      return run_keys(line.keys);
    case Command::run:
      if (!line.family->run) {
        throw option_error("run", "the family " + line.family->name + " has no `run` command",
                           "use warmup or keys for it");
      }
      return line.family->run(line.run);
    case Command::cache: {
      CacheCommandContext context;
      if (line.cache.action == CacheAction::explain || line.cache.action == CacheAction::push ||
          line.cache.action == CacheAction::pull) {
        // `cache explain` explains (and push / pull copy) the manifest `warmup` compiles with
        // the same options, for the arch that warmup compiles for.
        auto selection = std::make_shared<Selection>();
        select(*line.family, line.values, line.arch, *selection);
        line.cache.arch = selection->configuration.arch;
        context.manifest = [selection] { return checked_manifest(selection->registry); };
      }
      return run_cache_command(line.cache, context);
    }
    case Command::none:
      break;
  }
  return kExitUsage;
}

int run_command_line(int argc, char** argv, std::span<const Family> families,
                     const ToolOptions& options) {
  CommandLine line;
  if (families.empty()) {
    return report({kExitFailure, "this tool was built without a kernel family",
                   "pass at least one zerojit::tool::Family to run_cli"},
                  line);
  }
  const std::vector<std::string> arguments(argv + 1, argv + argc);
  line = parse_command_line(arguments, families, options);
  if (!line.help.empty()) {
    std::fputs(line.help.c_str(), stdout);
    return kExitOk;
  }
  if (line.error) return report(*line.error, line);
  try {
    return execute(line);
  } catch (const ToolError& error) {
    return report(error, line);
  } catch (const ConfigurationError& error) {
    const std::string hint = error.hint().empty() ? "fix the option named above" : error.hint();
    return report(
        {kExitUsage, error.what(),
         hint + "; " + see_help(line.name) + " for the options and their accepted values"},
        line);
  } catch (const zerojit::RuntimeJitError& error) {
    return report({kExitRuntimeJit, error.what(),
                   "widen the warmup space of " + error.kernel() + " to cover this call"},
                  line);
  } catch (const zerojit::CompileError& error) {
    return report({kExitCompileFailure, error.what(), "read the compiler's log above"}, line);
  } catch (const zerojit::UnavailableError& error) {
    return report({kExitFailure, error.what(),
                   "install what is missing (the CUDA driver for GPUs; the CUDA toolkit's NVRTC "
                   "for compiling, found through CUDA_HOME); `" +
                       program_name() + " --version` says what was found"},
                  line);
  } catch (const std::exception& error) {
    return report({kExitFailure, error.what(),
                   "if this looks like a bug, report it with the command line that caused it"},
                  line);
  }
}

}  // namespace

int run_cli(int argc, char** argv, std::span<const Family> families, const ToolOptions& options) {
  set_program_name(options.program.empty() ? "zerojit" : options.program);
  set_log_source(program_name());
  const int code = run_command_line(argc, argv, families, options);
  // A report that could not be written (a full disk under a redirect, a closed pipe) is work
  // not done: never exit 0 for it.
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    std::fprintf(stderr, "%s: error: cannot write standard output; the report is lost\n",
                 program_name().c_str());
    return code == kExitOk ? kExitFailure : code;
  }
  return code;
}

}  // namespace zerojit::tool

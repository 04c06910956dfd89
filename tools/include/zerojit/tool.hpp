// The zerojit command-line tool as a library (target zerojit::cli): a project that defines its
// own kernel families gets every command of `zerojit` for them (warmup, keys, cache ..., and
// run where the family provides one) by writing a small main that passes its families:
//
//   int main(int argc, char** argv) {
//     const zerojit::tool::Family families[] = {my_family()};
//     return zerojit::tool::run_cli(argc, argv, families, {.program = "mytool"});
//   }
//
// A family describes its options as data (flag, help, a whole-number domain or a check); the
// tool registers them on warmup, keys, cache explain (and run), checks them when the command line
// is parsed, and hands their values, in command-line order, to the family's configure function.
// Nothing of the command-line parser appears here, so linking the tool library brings no
// dependency into the consumer's build. docs/CONSUMING.md walks through it; docs/DESIGN.md says
// why this and not plugins.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "zerojit/registry.hpp"

namespace zerojit::tool {

// An option a family adds to its commands, e.g. `--model NAME`.
struct FamilyOption {
  std::string flag;                     // "--model"
  std::string value_name = "VALUE";     // what --help calls the value: "NAME|PATH", "N"
  std::string help;                     // one line; end it with the default in brackets
  std::string group = "Configuration";  // the --help section
  bool hidden = false;                  // left out of --help (e.g. options for tests)
  bool run_only = false;                // only `run` takes it (not warmup, keys, cache explain)
  // When set, the value must be a whole number within [minimum, maximum] (decimal digits).
  std::optional<std::int64_t> minimum;
  std::optional<std::int64_t> maximum;
  // Checked when the command line is parsed, before anything runs: returns what is wrong with
  // the value ("is not one of a, b"), or an empty string when it is fine. The tool reports it as
  // a usage error (exit 2) naming the option.
  std::function<std::string(const std::string& value)> check;
};

// The family options given on the command line, in order: (flag, value), e.g. ("--model", "x").
using OptionValues = std::vector<std::pair<std::string, std::string>>;

// What a family built from its options: the warmup it registers and how to name it.
struct FamilyConfiguration {
  std::string description;      // one line naming the configuration, printed by each command
  std::string arch = "sm_90a";  // the arch compiled for when nothing is loaded
  std::string json = "null";    // the configuration as a JSON document (keys/warmup --json)
  std::function<void(WarmupRegistry&)> register_warmup;
};

// A configuration the options cannot build. The tool reports it as a usage error (exit 2):
// the message should name the option at fault; the hint says what to do (the tool adds where
// --help is).
class ConfigurationError : public std::runtime_error {
 public:
  explicit ConfigurationError(const std::string& message, std::string hint = {})
      : std::runtime_error(message), hint_(std::move(hint)) {}
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

// What `run` was asked for: the generic options (the family's own are in `values`).
struct RunRequest {
  std::string family;
  OptionValues values;              // every family option given, run-only ones included
  std::optional<std::string> arch;  // --arch
  std::string cache_dir;            // --cache-dir
  std::vector<std::string> layers;  // --layer
  bool allow_shared = false;        // --allow-shared
  std::string remote_cache;         // --remote-cache
  std::string devices = "all";      // --devices
  int jobs = 0;                     // --jobs (0: one per core)
  bool in_process = false;          // --in-process
  std::int64_t steps = 2000;        // --steps
  std::uint64_t seed = 1;           // --seed
  std::string monitor = "error";    // --monitor off|warn|error
  bool dispatch_only = false;       // --dispatch-only
  bool json = false;                // --json
};

struct Family {
  std::string name;     // selected with --family NAME; the first family is the default
  std::string summary;  // one line for --help
  std::vector<FamilyOption> options;
  // Builds the configuration the option values name; `arch` is --arch when given. Throws
  // ConfigurationError for values that do not make a configuration.
  std::function<FamilyConfiguration(const OptionValues& values,
                                    const std::optional<std::string>& arch)>
      configure;
  // `run` for this family (optional: without it, `run` says the family has none). Returns the
  // exit code.
  std::function<int(const RunRequest& request)> run;
};

// A flag that selects a family, kept for command lines written before --family existed
// (`zerojit warmup --examples`).
struct FamilyFlag {
  std::string flag;    // "--examples"
  std::string family;  // "examples"
  std::string help;
};

struct ToolOptions {
  std::string program = "zerojit";  // the name in --help and in messages
  std::string description;          // the first line of --help (default: zerojit's)
  std::vector<FamilyFlag> family_flags;
};

// Parses the command line, runs the command and returns its exit code (0 ok, 1 runtime JIT,
// 2 usage, 3 compile failure, 4 bad cache entries, 5 other; docs/TOOL.md). Errors are reported
// on standard error (and as a JSON document with --json); nothing is thrown.
int run_cli(int argc, char** argv, std::span<const Family> families,
            const ToolOptions& options = {});

}  // namespace zerojit::tool

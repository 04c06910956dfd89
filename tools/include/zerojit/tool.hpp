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
//
// Every struct here may be written with designated initializers naming only the fields it sets
// (`{.flag = "--dtype", .help = "..."}`): each field has a default, so -Wextra has nothing to say.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "zerojit/cuda.hpp"
#include "zerojit/registry.hpp"

namespace zerojit::tool {

// An option a family adds to its commands, e.g. `--model NAME`.
struct FamilyOption {
  std::string flag{};                   // "--model"
  std::string value_name = "VALUE";     // what --help calls the value: "NAME|PATH", "N"
  std::string help{};                   // one line; end it with the default in brackets
  std::string group = "Configuration";  // the --help section
  bool hidden = false;                  // left out of --help (e.g. options for tests)
  bool run_only = false;                // only `run` takes it (not warmup, keys, cache explain)
  // When set, the value must be a whole number within [minimum, maximum] (decimal digits).
  std::optional<std::int64_t> minimum{};
  std::optional<std::int64_t> maximum{};
  // Checked when the command line is parsed, before anything runs: returns what is wrong with
  // the value ("is not one of a, b"), or an empty string when it is fine. The tool reports it as
  // a usage error (exit 2) naming the option.
  std::function<std::string(const std::string& value)> check{};
};

// The family options given on the command line, in order: (flag, value), e.g. ("--model", "x").
using OptionValues = std::vector<std::pair<std::string, std::string>>;

// What a family built from its options: the warmup it registers and how to name it.
struct FamilyConfiguration {
  std::string description{};    // one line naming the configuration, printed by each command
  std::string arch = "sm_90a";  // the arch compiled for when nothing is loaded
  std::string json = "null";    // the configuration as a JSON document (keys/warmup --json)
  std::function<void(WarmupRegistry&)> register_warmup{};
};

// A configuration the options cannot build. The tool reports it as a usage error (exit 2):
// the message should name the option at fault; the hint says what to do (the tool adds where
// --help is).
class ConfigurationError : public Error {
 public:
  explicit ConfigurationError(const std::string& message, std::string hint = {})
      : Error(message), hint_(std::move(hint)) {}
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

// What `run` was asked for: the generic options (the family's own are in `values`).
struct RunRequest {
  std::string family{};
  OptionValues values{};              // every family option given, run-only ones included
  std::optional<std::string> arch{};  // --arch
  std::string cache_dir{};            // --cache-dir
  std::vector<std::string> layers{};  // --layer
  bool allow_shared = false;          // --allow-shared
  std::string remote_cache{};         // --remote-cache
  std::string devices = "all";        // --devices
  int jobs = 0;                       // --jobs (0: one per core)
  bool in_process = false;            // --in-process
  std::int64_t steps = 2000;          // --steps
  std::uint64_t seed = 1;             // --seed
  std::string monitor = "error";      // --monitor off|warn|error
  bool dispatch_only = false;         // --dispatch-only
  bool json = false;                  // --json
};

struct Family {
  std::string name{};     // selected with --family NAME; the first family is the default
  std::string summary{};  // one line for --help
  std::vector<FamilyOption> options{};
  // Builds the configuration the option values name; `arch` is --arch when given. Throws
  // ConfigurationError for values that do not make a configuration.
  std::function<FamilyConfiguration(const OptionValues& values,
                                    const std::optional<std::string>& arch)>
      configure{};
  // `run` for this family (optional: without it, `run` says the family has none). Returns the
  // exit code; run_battery below is the usual body, and says what `run` must do.
  std::function<int(const RunRequest& request)> run{};
  // What `run --help` says the command does, one line (default: a generic sentence about the
  // battery of runtime calls).
  std::string run_help{};
  // What `run --help` says --steps counts [default: "Steps of the battery"].
  std::string steps_help{};
};

// A flag that selects a family, kept for command lines written before --family existed
// (`zerojit warmup --examples`).
struct FamilyFlag {
  std::string flag{};    // "--examples"
  std::string family{};  // "examples"
  std::string help{};
};

struct ToolOptions {
  // The name in --help, in messages and at the start of the library's log lines
  // ("axpy-tool warmup: [1/2] ...").
  std::string program = "zerojit";
  std::string description{};  // the first line of --help (default: a generic one)
  std::string epilog{};       // a last line for --help, e.g. where the tool's docs are
  std::vector<FamilyFlag> family_flags{};
};

// --- `run`: proving that warmup covers what the runtime asks for ------------------------------
//
// A family's `run` warms its configuration, arms the JIT monitor and drives a battery of runtime
// calls through the kernels. run_battery does all of that but the calls, which the family's
// battery makes through RunStep::call, once per step:
//
//   family.run = [](const RunRequest& request) {
//     const FamilyConfiguration configuration = my_configure(request.values, request.arch);
//     return run_battery(request, configuration, [](RunStep& step) {
//       std::mt19937_64 random(step.seed());
//       const MyDescriptors descriptors = ...;  // what serving hands the kernel at this step
//       step.call(MyKernel::instance(), descriptors, [&](cuda::Stream stream) {
//         MyKernel::instance()(arguments, stream);  // runs on a GPU only
//       });
//     });
//   };
//
// The contract run_battery keeps (docs/TOOL.md, "`run` for your family"):
//  * the request's cache options (--cache-dir, --layer, --allow-shared, --remote-cache) are
//    installed before anything else, as for warmup, and a refused root is refused the same way;
//  * every call's key, from the kernel's own dispatch of the call's descriptors, is checked
//    against the configuration's warmup manifest, with a GPU and without one. That is what makes
//    a run without a GPU (or with --dispatch-only) a proof: nothing launches there, so a key
//    that the disk cache serves is neither a compile nor a module load, and the monitor alone
//    would never see it;
//  * on a GPU (unless --dispatch-only) the manifest is warmed on each selected device
//    (--devices, --jobs, --in-process), the monitor is armed in --monitor's mode, and the
//    battery runs on each device in turn, with its launches; a compile or module load after
//    warmup is the monitor's to report;
//  * exit codes: 0 every call was covered; 1 a call outside the manifest, or a compile or load
//    after warmup, with --monitor error (warn reports each key once and goes on, off counts
//    them); 2 bad options or configuration, a device that does not exist, a refused cache root;
//    3 a key failed to compile during warmup; 5 anything else: a CUDA error, a call its kernel
//    rejects (an InvalidArgument: a bug in the battery), a battery that made no call at all,
//    NVRTC or the driver missing where needed;
//  * with --json, one document on standard output in the tool's envelope, failing or not:
//    {"schema": 1, "command": "run", "ok", "exit_code", "result": {...}, "error"?: {...}}.

class RunLedger;  // what a run has met so far (run_battery's own)

// One step of a battery: which step, its seed, and where its launches go.
class RunStep {
 public:
  RunStep(RunLedger& ledger, std::int64_t index, std::uint64_t seed, int device,
          cuda::Stream stream)
      : ledger_(&ledger), index_(index), seed_(seed), device_(device), stream_(stream) {}

  std::int64_t index() const { return index_; }    // 0 to --steps - 1
  std::uint64_t seed() const { return seed_; }     // this step's own, from --seed and index()
  bool launching() const { return device_ >= 0; }  // on a GPU: the calls' launches run
  int device() const { return device_; }           // the GPU the battery runs on; -1: none
  cuda::Stream stream() const { return stream_; }  // a stream on it

  // One runtime call of `kernel` with `descriptors`: its key (the kernel's dispatch) must be in
  // the warmup manifest; on a GPU, `launch` then makes the call on stream(). Descriptors the
  // kernel refuses throw its InvalidArgument (exit 5: the battery asked for a call serving never
  // makes).
  template <class Kernel>
  void call(Kernel& kernel, const typename Kernel::Descriptors& descriptors,
            const std::function<void(cuda::Stream)>& launch = {}) {
    call(kernel, kernel.key_text(kernel.dispatch(descriptors)), describe(descriptors), launch);
  }
  // The same with the key already dispatched (its text, describe(key)) and the descriptors as
  // text, for a battery that plans its calls itself.
  void call(const KernelBase& kernel, const std::string& key_text, const std::string& descriptors,
            const std::function<void(cuda::Stream)>& launch = {});

 private:
  RunLedger* ledger_;
  std::int64_t index_;
  std::uint64_t seed_;
  int device_;
  cuda::Stream stream_;
};

// The runtime calls of one battery step.
using Battery = std::function<void(RunStep& step)>;

// `run` for a family: the request's cache options, the configuration's manifest, warmup and
// the monitor on each GPU, --steps steps of `battery` (on each GPU in turn, or once through
// dispatch alone), the report (text or --json) and the exit code, as described above. Throws
// nothing that run_cli does not report.
int run_battery(const RunRequest& request, const FamilyConfiguration& configuration,
                const Battery& battery);

// Parses the command line, runs the command and returns its exit code (0 ok, 1 runtime JIT,
// 2 usage, 3 compile failure, 4 bad cache entries, 5 other; docs/TOOL.md). Errors are reported
// on standard error (and as a JSON document with --json); nothing is thrown.
int run_cli(int argc, char** argv, std::span<const Family> families,
            const ToolOptions& options = {});

}  // namespace zerojit::tool

// `zerojit warmup` (compile and load a configuration's manifest) and `zerojit keys` (print it),
// for any family (zerojit/tool.hpp). The structs are what the command line says
// (command_line.cpp fills them); nothing in them runs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "setup.hpp"
#include "zerojit/registry.hpp"
#include "zerojit/tool.hpp"

namespace zerojit::tool {

// What a command works on: the family and the configuration its options build.
struct Selection {
  const Family* family = nullptr;
  FamilyConfiguration configuration;
  WarmupRegistry registry;
};
// Configures `family` from the options and registers its warmup. Throws ConfigurationError.
void select(const Family& family, const OptionValues& values,
            const std::optional<std::string>& arch, Selection& out);

// The registry's manifest. A warmup space that a kernel's dispatch rejects (a configuration
// the family's checks accept but the kernels cannot build) is a ToolError (usage).
Manifest checked_manifest(const WarmupRegistry& registry);

struct WarmupCommand {
  const Family* family = nullptr;
  OptionValues values;
  std::optional<std::string> arch;
  CacheSelection cache;
  std::string devices = "all";
  int jobs = 0;
  bool in_process = false;  // compile in threads of this process, not in worker processes
  bool compile_only = false;
  std::vector<std::string> also;  // misses files whose keys are warmed too
  // Removed when warmup starts, written (JSON: time, keys, manifest digest) when it succeeded.
  std::string ready_file;
  std::string metrics_file;  // the counters after warmup, in Prometheus text format
  bool verbose = false;
  bool json = false;
};
int run_warmup(const WarmupCommand& command);

struct KeysCommand {
  const Family* family = nullptr;
  OptionValues values;
  std::optional<std::string> arch;
  bool json = false;
};
int run_keys(const KeysCommand& command);

}  // namespace zerojit::tool

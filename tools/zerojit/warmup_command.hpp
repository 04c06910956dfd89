// `zerojit warmup` (compile and load a configuration's manifest) and `zerojit keys` (print it).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "config_options.hpp"

namespace zerojit::tool {

struct WarmupCommand {
  ConfigOptions config;
  CacheSelection cache;
  std::string devices = "all";
  int jobs = 0;
  bool in_process = false;  // compile in threads of this process, not in worker processes
  bool compile_only = false;
  bool examples = false;
  bool verbose = false;
  bool json = false;
};
CLI::App* add_warmup_command(CLI::App& app, WarmupCommand& command);
int run_warmup(const WarmupCommand& command);

struct KeysCommand {
  ConfigOptions config;
  bool examples = false;
  bool json = false;
};
CLI::App* add_keys_command(CLI::App& app, KeysCommand& command);
int run_keys(const KeysCommand& command);

}  // namespace zerojit::tool

// `zerojit warmup` (compile and load a configuration's manifest) and `zerojit keys` (print it).
// The structs are what the command line says (command_line.cpp fills them); nothing in them runs.
#pragma once

#include <string>

#include "config_options.hpp"
#include "setup.hpp"

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
int run_warmup(const WarmupCommand& command);

struct KeysCommand {
  ConfigOptions config;
  bool examples = false;
  bool json = false;
};
int run_keys(const KeysCommand& command);

}  // namespace zerojit::tool

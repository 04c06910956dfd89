// `zerojit run`: warm a configuration, arm the monitor, and drive the serving battery through
// the kernels exactly as the attention layers call them, on each GPU (or, without one,
// through dispatch alone), proving that serving compiles nothing. The struct is what the
// command line says (command_line.cpp fills it); nothing in it runs.
#pragma once

#include <cstdint>
#include <string>

#include "config_options.hpp"
#include "setup.hpp"

namespace zerojit::tool {

struct RunCommand {
  ConfigOptions config;
  CacheSelection cache;
  std::string devices = "all";
  int jobs = 0;
  bool in_process = false;  // compile in threads of this process, not in worker processes
  std::int64_t steps = 2000;
  std::uint64_t seed = 1;
  std::string monitor = "error";
  bool dispatch_only = false;
  int layers = 1;
  std::int64_t max_model_len = 0;
  int max_num_seqs = 128;
  bool json = false;
};
int run_run(const RunCommand& command);

}  // namespace zerojit::tool

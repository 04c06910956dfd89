// The command line, parsed into a description of the command to run without running it:
// nothing is compiled, no cache is opened, no driver is asked. Every problem with the options
// comes back as a usage error (exit 2) that names the option, says what is wrong and what to
// do, so that main() can report it (also as a JSON failure document with --json) before any
// work starts. tests/fuzz/fuzz_cli_options.cpp fuzzes parse_command_line.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache_command.hpp"
#include "exit_codes.hpp"
#include "warmup_command.hpp"
#include "zerojit/tool.hpp"

namespace zerojit::tool {

enum class Command { none, version, warmup, keys, run, cache };

struct CommandLine {
  Command command = Command::none;
  // The command's name in messages and in the JSON envelope: "warmup", "cache ls", or
  // "zerojit" when no command was named.
  std::string name = "zerojit";
  // --json was asked for (the failure document too is JSON then).
  bool json = false;
  // --help was asked for: this text goes to standard output, exit 0.
  std::string help;
  // The options were wrong: report this, exit with its code (2), run nothing.
  std::optional<ToolError> error;

  // The family the command is for (--family, a family flag, or the first family), and the
  // family options given, in order; arch is --arch when given.
  const Family* family = nullptr;
  OptionValues values;
  std::optional<std::string> arch;

  WarmupCommand warmup;
  KeysCommand keys;
  RunRequest run;
  CacheCommand cache;
};

// `arguments` without the program name (argv[1..]). `families` must not be empty; `run` is a
// command only when one of them has a run function.
CommandLine parse_command_line(const std::vector<std::string>& arguments,
                               std::span<const Family> families, const ToolOptions& options = {});

}  // namespace zerojit::tool

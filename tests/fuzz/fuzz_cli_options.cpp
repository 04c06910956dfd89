// libFuzzer target for the tool's command-line parsing (tools/zerojit/command_line.cpp): any
// argument vector must parse into exactly one outcome (help, a usage error, or a command whose
// values lie in their documented domains) without crashing, hanging or undefined behaviour,
// and the JSON document the tool would print for it must be valid UTF-8 JSON. Built with
// -fsanitize=fuzzer,address,undefined by tests/fuzz/run_cli_fuzzer.sh, which runs it from a
// corpus of real command lines.
//
// Input: the arguments (argv[1..]), separated by NUL bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "json_output.hpp"
#include "option_values.hpp"
#include "zerojit/compiler.hpp"

namespace {

using namespace zerojit::tool;

void require(bool holds) {
  if (!holds) std::abort();
}

// What the tool would print: one JSON document that parses back.
void check_json(const nlohmann::json& document) {
  const std::string text = json_text(document);
  const nlohmann::json again = nlohmann::json::parse(text, nullptr, false);
  require(!again.is_discarded());
  require(again.at("schema") == kJsonSchemaVersion);
}

void check_arch(const std::string& arch) {
  try {
    zerojit::validate_arch(arch);
  } catch (...) {
    std::abort();  // accepted by the parser, refused by the compiler
  }
}

void check_config(const ConfigOptions& config) {
  require(!config.model.empty());
  require(config.testing_warmup_max_tokens >= 0 && config.testing_warmup_max_tokens <= 2147483647);
  for (const auto& [field, value] : config.serving) {
    require(!value.starts_with("--"));
    if (field == "target_arch") check_arch(value);
  }
}

void check_cache(const CacheSelection& cache) {
  for (const std::string& layer : cache.layers) require(!layer.empty());
}

void check(const CommandLine& line) {
  const int outcomes =
      (line.help.empty() ? 0 : 1) + (line.error ? 1 : 0) + (line.command != Command::none ? 1 : 0);
  require(outcomes == 1);
  if (line.error) {
    require(line.error->exit_code == kExitUsage);
    require(!line.error->message.empty());
    require(!line.error->hint.empty());
    check_json(failure_document(line.name, *line.error));
    return;
  }
  if (!line.help.empty()) return;
  nlohmann::json echo;  // what the command line said, printed back as a result would be
  switch (line.command) {
    case Command::warmup:
      check_config(line.warmup.config);
      check_cache(line.warmup.cache);
      require(line.warmup.jobs >= 0 && line.warmup.jobs <= 1024);
      parse_devices(line.warmup.devices);  // throws (and so fails) if malformed
      echo = {{"model", line.warmup.config.model}, {"cache_dir", line.warmup.cache.cache_dir}};
      break;
    case Command::keys:
      check_config(line.keys.config);
      echo = {{"model", line.keys.config.model}};
      break;
    case Command::run:
      check_config(line.run.config);
      check_cache(line.run.cache);
      require(line.run.steps >= 1 && line.run.steps <= 100'000'000);
      require(line.run.layers >= 1 && line.run.layers <= 64);
      require(line.run.max_num_seqs >= 1 && line.run.max_num_seqs <= 4096);
      require(line.run.max_model_len >= 0);
      require(line.run.monitor == "off" || line.run.monitor == "warn" ||
              line.run.monitor == "error");
      parse_devices(line.run.devices);
      echo = {{"model", line.run.config.model}, {"devices", line.run.devices}};
      break;
    case Command::cache:
      check_arch(line.cache.arch);
      echo = {{"cache_dir", line.cache.cache_dir}, {"key", line.cache.key}};
      break;
    case Command::version:
    case Command::none:
      break;
  }
  check_json(success_document(line.name, echo));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> arguments;
  std::string current;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      arguments.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  if (size > 0) arguments.push_back(std::move(current));
  try {
    check(parse_command_line(arguments));
  } catch (const ToolError&) {
    std::abort();  // parse_devices refused what the parser let through
  }
  return 0;
}

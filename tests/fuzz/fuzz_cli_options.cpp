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
#include "config_options.hpp"
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

void check_layers(const std::vector<std::string>& layers) {
  for (const std::string& layer : layers) require(!layer.empty());
}

// A whole-number family option within its domain (the parser checked it).
void check_number(const OptionValues& values, const std::string& flag, long long low,
                  long long high) {
  for (const auto& [given, value] : values) {
    if (given != flag) continue;
    const auto parsed = parse_whole_number(value, low, high);
    require(parsed.has_value());
  }
}

// zerojit's own families, as main.cpp passes them (configure is not needed to parse).
const std::vector<Family>& families() {
  static const std::vector<Family> all = [] {
    Family dsv4;
    dsv4.name = "dsv4";
    dsv4.options = dsv4_config_options();
    dsv4.run = [](const RunRequest&) { return 0; };
    Family examples;
    examples.name = "examples";
    return std::vector<Family>{dsv4, examples};
  }();
  return all;
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
    case Command::warmup: {
      require(line.warmup.family != nullptr);
      const ConfigOptions config = config_options_from(line.warmup.values, line.warmup.arch);
      check_config(config);
      check_layers(line.warmup.cache.layers);
      require(line.warmup.jobs >= 0 && line.warmup.jobs <= 1024);
      parse_devices(line.warmup.devices);  // throws (and so fails) if malformed
      echo = {{"model", config.model}, {"cache_dir", line.warmup.cache.cache_dir}};
      break;
    }
    case Command::keys: {
      const ConfigOptions config = config_options_from(line.keys.values, line.keys.arch);
      check_config(config);
      echo = {{"model", config.model}};
      break;
    }
    case Command::run: {
      const ConfigOptions config = config_options_from(line.run.values, line.run.arch);
      check_config(config);
      check_layers(line.run.layers);
      require(line.run.steps >= 1 && line.run.steps <= 100'000'000);
      check_number(line.run.values, "--layers", 1, 64);
      check_number(line.run.values, "--max-num-seqs", 1, 4096);
      check_number(line.run.values, "--max-model-len", 0, 2147483647);
      require(line.run.monitor == "off" || line.run.monitor == "warn" ||
              line.run.monitor == "error");
      parse_devices(line.run.devices);
      echo = {{"model", config.model}, {"devices", line.run.devices}};
      break;
    }
    case Command::cache:
      if (line.arch) check_arch(*line.arch);
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
    ToolOptions options;
    options.family_flags = {{"--examples", "examples", "The built-in example kernels"}};
    check(parse_command_line(arguments, families(), options));
  } catch (const ToolError&) {
    std::abort();  // parse_devices refused what the parser let through
  }
  return 0;
}

// libFuzzer target for the DSv4 configuration: arbitrary bytes as a config.json, and as serving
// option values, through loading, validation and manifest building (the gates and every
// kernel's warmup space and program). Built with -fsanitize=fuzzer,address,undefined by
// tests/fuzz/run_fuzzer.sh, which runs it from the files of tests/data/dsv4 and
// tests/fuzz/dsv4_config_seeds.
//
// Input: config.json text, optionally followed by a NUL byte and lines "option=value" (a
// command line's serving options). What must hold:
//  - bad input raises ConfigError and nothing else, and its message is printable as JSON
//    (valid UTF-8) and short;
//  - a configuration that validates for the kernels (validate_for_kernels: the gates refuse what
//    their kernels cannot build) builds its manifest and every key's program without any
//    exception;
//  - what loads saves and loads back to the same configuration.
// Any breach aborts; libFuzzer's -timeout catches a hang.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "dsv4/config/config.hpp"
#include "dsv4/config/json_text.hpp"
// The one header of the kernels this target needs (AttentionKernels); it moves with the DSv4
// sources, so it is named only here.
#include "dsv4/family.hpp"

namespace {

using nlohmann::json;
using zerojit::dsv4::ConfigError;
using zerojit::dsv4::Dsv4Config;

// Longer than any message quotes: a source name of up to 1 KiB plus short excerpts.
constexpr std::size_t kMaxMessageBytes = 4096;

[[noreturn]] void breach(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz_dsv4_config: %s\n%.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

void check_message(const ConfigError& error) {
  const std::string message = error.what();
  try {
    (void)json(message).dump();
  } catch (const json::exception&) {
    breach("a ConfigError message is not valid UTF-8", message);
  }
  if (message.size() > kMaxMessageBytes) breach("a ConfigError message is too long", message);
}

// Runs `step`; a ConfigError is an accepted refusal (its message checked), anything else a
// breach. Returns whether the step succeeded.
template <class Step>
bool refused_cleanly(const char* what, Step&& step) {
  try {
    step();
    return true;
  } catch (const ConfigError& error) {
    check_message(error);
    return false;
  } catch (const std::exception& error) {
    breach(what, error.what());
  }
}

// A validated configuration must build its whole manifest.
void build_manifest(const Dsv4Config& config) {
  try {
    zerojit::WarmupRegistry registry;
    zerojit::dsv4::AttentionKernels(config).register_warmup(registry);
    for (const zerojit::ManifestEntry& entry : registry.manifest().entries) {
      (void)entry.program();
    }
  } catch (const std::exception& error) {
    breach("a configuration that validated does not build its manifest", error.what());
  }
}

// Builds the manifest of a validated configuration and checks its round trip. Most inputs fall
// back to the same few configurations (a mutated file that no longer loads leaves the preset),
// so each distinct one is checked once, which keeps the run fast.
void check_valid(const Dsv4Config& config) {
  std::string text;
  try {
    text = json(config).dump();
  } catch (const json::exception& error) {
    breach("a validated configuration does not print as JSON", error.what());
  }
  static std::set<std::string> checked;
  constexpr std::size_t kMaxRemembered = std::size_t{1} << 14;
  if (checked.count(text) != 0) return;
  if (checked.size() < kMaxRemembered) checked.insert(text);
  build_manifest(config);
  Dsv4Config again;
  if (!refused_cleanly("reloading a saved configuration",
                       [&] { again = json::parse(text).get<Dsv4Config>(); })) {
    breach("a saved configuration does not load back", text);
  }
  if (!(again == config)) breach("a saved configuration loads back different", text);
}

void check(std::string_view input) {
  const std::size_t separator = input.find('\0');
  const std::string_view document = input.substr(0, separator);
  const std::string_view options =
      separator == std::string_view::npos ? std::string_view() : input.substr(separator + 1);

  // As a config.json (the model), falling back to the preset so the options are still tried.
  Dsv4Config config = zerojit::dsv4::default_config();
  refused_cleanly("loading a config.json", [&] {
    config.model = zerojit::dsv4::model_config_from_text(document, "fuzz.json");
  });
  // The same text as a whole saved configuration ({"model": ..., "serving": ...}).
  std::optional<Dsv4Config> whole;
  refused_cleanly("loading a saved configuration", [&] {
    whole =
        zerojit::dsv4::config_detail::parse_config_json(document, "fuzz.json").get<Dsv4Config>();
  });

  for (std::size_t start = 0; start < options.size();) {
    const std::size_t end = std::min(options.find('\n', start), options.size());
    const std::string_view line = options.substr(start, end - start);
    const std::size_t equals = line.find('=');
    refused_cleanly("setting a serving option", [&] {
      zerojit::dsv4::set_serving_option(
          config.serving, line.substr(0, equals),
          equals == std::string_view::npos ? std::string_view() : line.substr(equals + 1));
    });
    start = end + 1;
  }

  for (const Dsv4Config* candidate : {&config, whole ? &*whole : nullptr}) {
    if (candidate == nullptr) continue;
    if (refused_cleanly("validating", [&] { zerojit::dsv4::validate_for_kernels(*candidate); })) {
      check_valid(*candidate);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

#include "cache_command.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <tuple>

#include "exit_codes.hpp"
#include "json_output.hpp"
#include "option_values.hpp"
#include "terminal.hpp"
#include "zerojit/compiler.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/runtime.hpp"

namespace zerojit::tool {
namespace {

using nlohmann::json;

std::string age_text(double seconds) {
  char buffer[32];
  if (seconds < 120) {
    std::snprintf(buffer, sizeof buffer, "%.0fs", seconds);
  } else if (seconds < 2 * 3600) {
    std::snprintf(buffer, sizeof buffer, "%.0fm", seconds / 60);
  } else if (seconds < 2 * 86400) {
    std::snprintf(buffer, sizeof buffer, "%.0fh", seconds / 3600);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.0fd", seconds / 86400);
  }
  return buffer;
}

std::string size_text(std::uint64_t bytes) {
  char buffer[32];
  if (bytes < 10 * 1024) {
    std::snprintf(buffer, sizeof buffer, "%llu B", static_cast<unsigned long long>(bytes));
  } else if (bytes < 10ull * 1024 * 1024) {
    std::snprintf(buffer, sizeof buffer, "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1f MiB", static_cast<double>(bytes) / (1024 * 1024));
  }
  return buffer;
}

ToolError usage(const CacheCommand& command, std::string message, std::string_view hint) {
  return option_error(cache_command_name(command.action), std::move(message), hint);
}

// The cache the options name, or nullptr for a root that does not exist (an empty cache).
// Throws ToolError (usage) for a root that cannot be used; other warnings go to standard error.
std::shared_ptr<DiskCache> open_cache(const CacheCommand& command) {
  DiskCacheOptions cache_options;
  try {
    cache_options = default_disk_cache_options();
  } catch (const Error& error) {
    throw usage(command, error.what(), "fix or unset the environment variable it names");
  }
  const bool layers = !command.layers.empty() || !cache_options.read_only_layers.empty();
  if (!command.cache_dir.empty()) {
    cache_options.root = command.cache_dir;
  } else if (!default_cache_root()) {
    // Off: no root, but the read-only layers are still a cache to list and verify.
    if (!layers) {
      throw usage(command, "the disk cache is disabled (ZEROJIT_CACHE_DIR=off)",
                  "name a cache with --cache-dir DIR, or its layers with --layer DIR");
    }
  } else if (cache_options.root.empty()) {
    throw usage(command,
                "no cache directory: none of ZEROJIT_CACHE_DIR, XDG_CACHE_HOME, HOME is set",
                "set one of them, or pass --cache-dir DIR");
  }
  for (const std::string& layer : command.layers) {
    cache_options.read_only_layers.emplace_back(layer);
  }
  cache_options.allow_shared_root = cache_options.allow_shared_root || command.allow_shared;
  cache_options.create_root = false;  // a mistyped --cache-dir is reported, not created
  // Warnings met while opening are held back: when the root is refused, the refusal is the
  // error message. Later ones (bad entries met while listing) go straight to standard error.
  struct Warnings {
    std::vector<std::string> held;
    bool hold = true;
  };
  auto warnings = std::make_shared<Warnings>();
  cache_options.warning_sink = [warnings](std::string_view line) {
    if (warnings->hold) {
      warnings->held.emplace_back(line);
    } else {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    }
  };
  std::error_code error;
  const bool root_exists = std::filesystem::exists(cache_options.root, error);
  if (!root_exists && cache_options.read_only_layers.empty()) return nullptr;
  auto cache = std::make_shared<DiskCache>(cache_options);
  const CacheRootState state = cache->state();
  warnings->hold = false;
  if (root_exists && state == CacheRootState::unusable) {
    const std::string reason = cache->state_reason();
    throw usage(command, reason,
                reason.starts_with("refusing ")
                    ? "use a directory only you can write (chmod go-w DIR), or, if everyone who "
                      "can write it is trusted, pass --allow-shared (or set "
                      "ZEROJIT_CACHE_ALLOW_SHARED=1)"
                    : "name a cache directory you can read with --cache-dir DIR");
  }
  for (const std::string& line : warnings->held) std::fprintf(stderr, "%s\n", line.c_str());
  return cache;
}

std::string root_of(const CacheCommand& command) {
  if (!command.cache_dir.empty()) return command.cache_dir;
  const auto root = default_cache_root();
  return root ? root->string() : std::string();
}

int run_ls(const CacheCommand& command) {
  const auto cache = open_cache(command);
  std::vector<CacheEntryInfo> entries = cache ? cache->list() : std::vector<CacheEntryInfo>{};
  // list() gives the layers in search order; within each, sort by kernel, key and arch.
  for (auto begin = entries.begin(); begin != entries.end();) {
    const auto end = std::find_if(begin, entries.end(), [&](const CacheEntryInfo& entry) {
      return entry.layer != begin->layer;
    });
    std::sort(begin, end, [](const CacheEntryInfo& a, const CacheEntryInfo& b) {
      return std::tie(a.kernel, a.key, a.arch, a.identity) <
             std::tie(b.kernel, b.key, b.arch, b.identity);
    });
    begin = end;
  }
  std::uint64_t total = 0;
  for (const CacheEntryInfo& entry : entries) total += entry.size_bytes;
  if (command.json) {
    print_json(success_document(cache_command_name(command.action),
                                {{"root", root_of(command)},
                                 {"exists", cache != nullptr},
                                 {"count", entries.size()},
                                 {"bytes", total},
                                 {"entries", parse_library_json(to_json(entries))}}));
    return kExitOk;
  }
  if (!cache) {
    std::printf("no cache at %s\n", root_of(command).c_str());
    return kExitOk;
  }
  // Columns sized to their content: a long kernel name, key or path widens its column instead
  // of pushing the others out of line. A bad entry's problem comes last, where it can run on.
  const Style out = Style::for_stream(stdout);
  Table table({{"kernel"},
               {"key"},
               {"arch"},
               {"size", Table::Align::right},
               {"age", Table::Align::right},
               {"layer"},
               {"status"}});
  for (const CacheEntryInfo& entry : entries) {
    const std::string layer = entry.layer + (entry.read_only ? " (read-only)" : "");
    if (entry.problem != EntryProblem::none) {
      table.add_row(
          {"?", entry.identity, "", size_text(entry.size_bytes), age_text(entry.age_seconds), layer,
           out.red("BAD " + std::string(to_string(entry.problem))) + ": " + entry.detail});
      continue;
    }
    table.add_row({entry.kernel, entry.key, entry.arch, size_text(entry.size_bytes),
                   age_text(entry.age_seconds), layer, "ok"});
    if (command.long_listing) {
      // Below its entry, across the columns: the language, its compiler, and the launch the
      // entry's record fixes (decoded by its entry kind, as every load decodes it).
      table.add_note("  " + std::string(to_string(entry.language)) + ", " + entry.compiler_version +
                     ": " + entry.launch);
    }
  }
  if (!table.empty()) table.print(stdout, out);
  std::printf("%zu entries, %s\n", entries.size(), size_text(total).c_str());
  return kExitOk;
}

int run_verify(const CacheCommand& command) {
  const auto cache = open_cache(command);
  const CacheVerifyReport report = cache ? cache->verify(command.set_aside) : CacheVerifyReport{};
  std::optional<ToolError> failure;
  if (!cache && !command.cache_dir.empty()) {
    // A mistyped pack path must not pass as a pack with no bad entries.
    failure = ToolError{
        kExitUsage, "there is no cache at " + command.cache_dir + " to verify",
        "check the path (`" + program_name() + " cache ls --cache-dir DIR` lists a cache)"};
  } else if (!report.ok()) {
    failure = ToolError{kExitCacheBadEntries,
                        std::to_string(report.bad.size()) + " of " +
                            std::to_string(report.checked) + " cache entries are bad",
                        command.set_aside
                            ? "they were moved to quarantine/; each is compiled again when next "
                              "needed"
                            : "`" + program_name() +
                                  " cache verify --set-aside` moves them to quarantine/ (each is "
                                  "compiled again when next needed); " +
                                  docs_page("CACHE.md") + " names the problems"};
  }
  if (command.json) {
    json result = parse_library_json(report.to_json());
    result["root"] = root_of(command);
    result["exists"] = cache != nullptr;
    print_json(failure ? failure_document(cache_command_name(command.action), *failure, result)
                       : success_document(cache_command_name(command.action), result));
  } else if (cache) {
    for (const CacheEntryInfo& entry : report.bad) {
      std::printf("BAD %s (%s): %s\n", entry.path.c_str(),
                  std::string(to_string(entry.problem)).c_str(), entry.detail.c_str());
    }
    for (const CacheEntryInfo& entry : report.busy) {
      std::printf("BUSY %s: %s; not checked\n", entry.path.c_str(), entry.detail.c_str());
    }
    std::printf("%zu entries checked: %zu valid, %zu bad\n", report.checked, report.valid,
                report.bad.size());
    if (!report.busy.empty()) {
      std::printf("%zu entries held locked by other processes were not checked\n",
                  report.busy.size());
    }
  } else if (!failure) {
    std::printf("no cache at %s\n", root_of(command).c_str());  // the default root: none yet
  }
  if (failure) print_error(failure->message, failure->hint);
  return failure ? failure->exit_code : kExitOk;
}

void print_gc(const CacheCommand& command, const CacheGcReport& report, const char* verb) {
  if (command.json) {
    print_json(
        success_document(cache_command_name(command.action), parse_library_json(report.to_json())));
    return;
  }
  std::printf("%s %zu entries (%s); kept %zu (%s)", verb, report.removed,
              size_text(report.removed_bytes).c_str(), report.kept,
              size_text(report.kept_bytes).c_str());
  if (report.busy != 0) std::printf("; %zu in use by other processes, left in place", report.busy);
  if (report.other_files_removed != 0) {
    std::printf("; %zu leftover files removed", report.other_files_removed);
  }
  std::printf("\n");
}

int run_gc(const CacheCommand& command) {
  const auto cache = open_cache(command);
  CacheGcReport report = cache ? cache->gc(command.max_size) : CacheGcReport{};
  if (!cache) report.quota_bytes = command.max_size.value_or(kDefaultCacheQuotaBytes);
  print_gc(command, report, "removed");
  return kExitOk;
}

int run_clear(const CacheCommand& command) {
  const auto cache = open_cache(command);
  print_gc(command, cache ? cache->clear() : CacheGcReport{}, "cleared");
  return kExitOk;
}

// The manifest's programs that --kernel and --key select; a filter that selects nothing is a
// usage error.
std::vector<Program> programs_to_explain(const CacheCommand& command, const Manifest& manifest) {
  std::vector<Program> programs;
  std::vector<std::string> kernel_names;  // of the manifest, in its order
  for (const ManifestEntry& entry : manifest.entries) {
    const std::string& name = entry.kernel->name();
    if (std::find(kernel_names.begin(), kernel_names.end(), name) == kernel_names.end()) {
      kernel_names.push_back(name);
    }
    if (!command.kernel.empty() && name != command.kernel) continue;
    if (!command.key.empty() && entry.key_text.find(command.key) == std::string::npos) continue;
    programs.push_back(entry.program());
  }
  // A filter that selects nothing is a typo, not "0 keys: 0 hits, 0 misses".
  if (!command.kernel.empty() &&
      std::find(kernel_names.begin(), kernel_names.end(), command.kernel) == kernel_names.end()) {
    std::string names;
    for (const std::string& name : kernel_names) names += (names.empty() ? "" : ", ") + name;
    const auto guess = nearest(command.kernel, kernel_names);
    throw ToolError{
        kExitUsage,
        "--kernel " + shown(command.kernel) + " is no kernel of this configuration's manifest",
        guess ? "did you mean --kernel " + *guess + "?"
              : "name one of: " + (names.empty() ? std::string("(none)") : names)};
  }
  if (programs.empty() && !command.key.empty()) {
    throw ToolError{kExitUsage,
                    "--key " + shown(command.key) + ": no key of " +
                        (command.kernel.empty() ? "the manifest" : command.kernel) +
                        " contains this text",
                    "`" + program_name() + " keys` lists the keys' texts"};
  }
  return programs;
}

int run_explain(const CacheCommand& command, const CacheCommandContext& context) {
  if (!context.manifest) {
    throw ToolError{kExitUsage, "this tool has no kernel manifest to explain",
                    "use a tool built with kernel families"};
  }
  const Manifest manifest = context.manifest();
  const auto cache = open_cache(command);
  // Through the runtime, so that the cache's version memo and records answer when they can.
  if (cache) Runtime::instance().set_artifact_store(cache);
  std::string nvrtc = command.nvrtc_version;  // asked for only when a CUDA C++ key is explained
  const auto compiler_version = [&](Language language) {
    const EntryKind& kind = entry_kind(language);
    try {
      if (!kind.compiled_by_nvrtc) {
        return Runtime::instance().compiler_version(language, command.arch);
      }
      if (nvrtc.empty()) nvrtc = Runtime::instance().nvrtc_version();
      return nvrtc;
    } catch (const UnavailableError& error) {
      throw ToolError{
          kExitFailure,
          "the " + std::string(kind.compiler) +
              " compiler is not available to say which version to explain for: " + error.what(),
          kind.compiled_by_nvrtc
              ? "pass --nvrtc-version V (e.g. 13.0) to explain without NVRTC"
              : "install the compiler, or explain against a cache that records one version"};
    }
  };
  const std::vector<Program> programs = programs_to_explain(command, manifest);
  std::vector<MissExplanation> explanations;
  if (cache) {
    explanations = cache->explain(programs, command.arch, compiler_version);
  } else {
    for (const Program& program : programs) {
      MissExplanation explanation;
      explanation.kernel = program.kernel_name;
      explanation.key = program.key_text;
      explanation.arch = command.arch;
      explanation.language = program.language;
      explanation.compiler_version = compiler_version(program.language);
      explanation.identity =
          compute_identity(program, command.arch, explanation.compiler_version).hex();
      explanations.push_back(std::move(explanation));
    }
  }
  if (command.misses_only) {
    std::erase_if(explanations, [](const MissExplanation& e) { return e.present; });
  }
  std::size_t hits = 0;
  for (const MissExplanation& explanation : explanations) hits += explanation.present ? 1 : 0;
  if (command.json) {
    json keys = json::array();
    for (const MissExplanation& explanation : explanations) {
      keys.push_back(parse_library_json(explanation.to_json()));
    }
    print_json(success_document(cache_command_name(command.action),
                                {{"arch", command.arch},
                                 {"nvrtc_version", nvrtc},
                                 {"hits", hits},
                                 {"misses", explanations.size() - hits},
                                 {"keys", keys}}));
  } else {
    for (const MissExplanation& explanation : explanations) {
      std::printf("%s\n", explanation.summary().c_str());
    }
    std::printf("%zu keys: %zu hits, %zu misses\n", explanations.size(), hits,
                explanations.size() - hits);
  }
  return kExitOk;
}

}  // namespace

std::string_view cache_command_name(CacheAction action) {
  switch (action) {
    case CacheAction::ls:
      return "cache ls";
    case CacheAction::verify:
      return "cache verify";
    case CacheAction::gc:
      return "cache gc";
    case CacheAction::clear:
      return "cache clear";
    case CacheAction::explain:
      return "cache explain";
    case CacheAction::push:
      return "cache push";
    case CacheAction::pull:
      return "cache pull";
    case CacheAction::misses:
      return "cache misses";
  }
  return "cache";
}

int run_cache_command(const CacheCommand& command, const CacheCommandContext& context) {
  switch (command.action) {
    case CacheAction::ls:
      return run_ls(command);
    case CacheAction::verify:
      return run_verify(command);
    case CacheAction::gc:
      return run_gc(command);
    case CacheAction::clear:
      return run_clear(command);
    case CacheAction::explain:
      return run_explain(command, context);
    case CacheAction::push:
    case CacheAction::pull:
      return run_remote_transfer(command, context);
    case CacheAction::misses:
      return run_misses(command);
  }
  return kExitFailure;
}

}  // namespace zerojit::tool

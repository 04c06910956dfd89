#include "cache_command.hpp"

#include "exit_codes.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "zerojit/bytes.hpp"
#include "zerojit/compiler.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/runtime.hpp"

namespace zerojit::tool {
namespace {

// Options shared by every cache command, bound to CLI11 options: they live as long as the
// commands' callbacks, which hold them.
struct CacheOptions {
  std::string cache_dir;
  std::vector<std::string> layers;
  bool json = false;
  bool allow_shared = false;
  // verify
  bool set_aside = false;
  // gc
  std::string max_size;
  // explain
  std::string arch = "sm_90a";
  std::string kernel;
  std::string key;
  std::string nvrtc_version;
  bool misses_only = false;
};

// A usage or configuration problem: reported and turned into exit code 2.
struct UsageProblem {
  std::string message;
};

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

// The cache the options name, or nullptr for a root that does not exist (an empty cache).
// Throws UsageProblem for a root that cannot be used; other warnings go to standard error.
std::shared_ptr<DiskCache> open_cache(const CacheOptions& options) {
  DiskCacheOptions cache_options;
  try {
    cache_options = default_disk_cache_options();
  } catch (const Error& error) {
    throw UsageProblem{error.what()};
  }
  if (!options.cache_dir.empty()) {
    cache_options.root = options.cache_dir;
  } else if (!default_cache_root()) {
    throw UsageProblem{
        "the disk cache is disabled (ZEROJIT_CACHE_DIR=off); name one with "
        "--cache-dir"};
  } else if (cache_options.root.empty()) {
    throw UsageProblem{"no cache directory: set ZEROJIT_CACHE_DIR or HOME, or pass --cache-dir"};
  }
  for (const std::string& layer : options.layers)
    cache_options.read_only_layers.emplace_back(layer);
  cache_options.allow_shared_root = cache_options.allow_shared_root || options.allow_shared;
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
  if (root_exists && state == CacheRootState::unusable) throw UsageProblem{cache->state_reason()};
  warnings->hold = false;
  for (const std::string& line : warnings->held) std::fprintf(stderr, "%s\n", line.c_str());
  return cache;
}

std::string root_of(const CacheOptions& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  const auto root = default_cache_root();
  return root ? root->string() : std::string();
}

int run_ls(const CacheOptions& options) {
  const auto cache = open_cache(options);
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
  if (options.json) {
    std::cout << to_json(entries) << "\n";
    return kExitOk;
  }
  if (!cache) {
    std::printf("no cache at %s\n", root_of(options).c_str());
    return kExitOk;
  }
  std::uint64_t total = 0;
  std::printf("%-24s %-36s %-8s %10s %6s  %s\n", "KERNEL", "KEY", "ARCH", "SIZE", "AGE", "LAYER");
  for (const CacheEntryInfo& entry : entries) {
    total += entry.size_bytes;
    const std::string layer = entry.layer + (entry.read_only ? " (read-only)" : "");
    if (entry.problem != EntryProblem::none) {
      std::printf("%-24s %-36s %-8s %10s %6s  %s  [BAD %s: %s]\n", "?", entry.identity.c_str(), "",
                  size_text(entry.size_bytes).c_str(), age_text(entry.age_seconds).c_str(),
                  layer.c_str(), std::string(to_string(entry.problem)).c_str(),
                  entry.detail.c_str());
      continue;
    }
    std::printf("%-24s %-36s %-8s %10s %6s  %s\n", entry.kernel.c_str(), entry.key.c_str(),
                entry.arch.c_str(), size_text(entry.size_bytes).c_str(),
                age_text(entry.age_seconds).c_str(), layer.c_str());
  }
  std::printf("%zu entries, %s\n", entries.size(), size_text(total).c_str());
  return kExitOk;
}

int run_verify(const CacheOptions& options) {
  const auto cache = open_cache(options);
  const CacheVerifyReport report = cache ? cache->verify(options.set_aside) : CacheVerifyReport{};
  if (options.json) {
    std::cout << report.to_json() << "\n";
  } else {
    for (const CacheEntryInfo& entry : report.bad) {
      std::printf("BAD %s (%s): %s\n", entry.path.c_str(),
                  std::string(to_string(entry.problem)).c_str(), entry.detail.c_str());
    }
    for (const CacheEntryInfo& entry : report.busy) {
      std::printf("BUSY %s: %s; not checked\n", entry.path.c_str(), entry.detail.c_str());
    }
    std::printf(
        "%zu entries checked: %zu valid, %zu bad%s\n", report.checked, report.valid,
        report.bad.size(),
        report.bad.empty() || options.set_aside ? "" : " (--set-aside moves them to quarantine/)");
    if (!report.busy.empty()) {
      std::printf("%zu entries held locked by other processes were not checked\n",
                  report.busy.size());
    }
  }
  return report.ok() ? kExitOk : kExitCacheBadEntries;
}

void print_gc(const CacheOptions& options, const CacheGcReport& report, const char* verb) {
  if (options.json) {
    std::cout << report.to_json() << "\n";
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

int run_gc(const CacheOptions& options) {
  std::optional<std::uint64_t> max_bytes;
  if (!options.max_size.empty()) {
    try {
      max_bytes = parse_byte_size_or_throw(options.max_size, "--max-size");
    } catch (const Error& error) {
      throw UsageProblem{error.what()};
    }
  }
  const auto cache = open_cache(options);
  CacheGcReport report = cache ? cache->gc(max_bytes) : CacheGcReport{};
  if (!cache) report.quota_bytes = max_bytes.value_or(kDefaultCacheQuotaBytes);
  print_gc(options, report, "removed");
  return kExitOk;
}

int run_clear(const CacheOptions& options) {
  const auto cache = open_cache(options);
  print_gc(options, cache ? cache->clear() : CacheGcReport{}, "cleared");
  return kExitOk;
}

int run_explain(const CacheOptions& options, const CacheCommandContext& context) {
  validate_arch(options.arch);
  if (!context.manifest) throw UsageProblem{"this tool has no kernel manifest to explain"};
  const Manifest manifest = context.manifest();
  const auto cache = open_cache(options);
  std::string nvrtc = options.nvrtc_version;
  if (nvrtc.empty()) {
    // Through the runtime, so that the cache's NVRTC version memo answers when it can.
    if (cache) Runtime::instance().set_artifact_store(cache);
    try {
      nvrtc = Runtime::instance().nvrtc_version();
    } catch (const UnavailableError& error) {
      throw UsageProblem{std::string(error.what()) +
                         "; pass --nvrtc-version to explain without NVRTC"};
    }
  }
  std::vector<Program> programs;
  for (const ManifestEntry& entry : manifest.entries) {
    if (!options.kernel.empty() && entry.kernel->name() != options.kernel) continue;
    if (!options.key.empty() && entry.key_text.find(options.key) == std::string::npos) continue;
    programs.push_back(entry.program());
  }
  std::vector<MissExplanation> explanations;
  if (cache) {
    explanations = cache->explain(programs, options.arch, nvrtc);
  } else {
    for (const Program& program : programs) {
      MissExplanation explanation;
      explanation.kernel = program.kernel_name;
      explanation.key = program.key_text;
      explanation.arch = options.arch;
      explanation.nvrtc_version = nvrtc;
      explanation.identity = compute_identity(program, options.arch, nvrtc).hex();
      explanations.push_back(std::move(explanation));
    }
  }
  if (options.misses_only) {
    std::erase_if(explanations, [](const MissExplanation& e) { return e.present; });
  }
  if (options.json) {
    std::string out = "[";
    for (std::size_t i = 0; i < explanations.size(); ++i) {
      out += (i == 0 ? "" : ",") + explanations[i].to_json();
    }
    std::cout << out << "]\n";
  } else {
    std::size_t hits = 0;
    for (const MissExplanation& explanation : explanations) {
      hits += explanation.present ? 1 : 0;
      std::printf("%s\n", explanation.summary().c_str());
    }
    std::printf("%zu keys: %zu hits, %zu misses\n", explanations.size(), hits,
                explanations.size() - hits);
  }
  return kExitOk;
}

// Runs one command, turning problems into messages and exit codes.
template <class Command>
void run_reporting(CacheCommandContext& context, Command command) {
  try {
    context.exit_code = command();
  } catch (const UsageProblem& problem) {
    std::fprintf(stderr, "zerojit cache: %s\n", problem.message.c_str());
    context.exit_code = kExitUsage;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "zerojit cache: %s\n", error.what());
    context.exit_code = kExitUsage;
  }
}

void add_common_options(CLI::App& command, CacheOptions& options) {
  command.add_option("--cache-dir", options.cache_dir,
                     "Cache root (default: $ZEROJIT_CACHE_DIR, $XDG_CACHE_HOME/zerojit or "
                     "~/.cache/zerojit)");
  command.add_option("--layer", options.layers,
                     "A read-only layer searched before the root (repeatable; also "
                     "$ZEROJIT_CACHE_READONLY_DIRS)");
  command.add_flag("--allow-shared", options.allow_shared,
                   "Accept a root other users can write (also ZEROJIT_CACHE_ALLOW_SHARED=1)");
  command.add_flag("--json", options.json, "Machine-readable output");
}

}  // namespace

void add_cache_commands(CLI::App& app, CacheCommandContext& context) {
  auto options = std::make_shared<CacheOptions>();
  CLI::App* cache =
      app.add_subcommand("cache", "Manage the persistent compile cache (docs/CACHE.md)");
  cache->require_subcommand(1);

  CLI::App* ls = cache->add_subcommand("ls", "List entries: kernel, key, arch, size, age, layer");
  add_common_options(*ls, *options);
  ls->callback([options, &context] { run_reporting(context, [&] { return run_ls(*options); }); });

  CLI::App* verify = cache->add_subcommand(
      "verify", "Check every entry's checksum and identity (exit 4 when some are bad)");
  add_common_options(*verify, *options);
  verify->add_flag("--set-aside", options->set_aside,
                   "Move bad entries of the root to quarantine/");
  verify->callback(
      [options, &context] { run_reporting(context, [&] { return run_verify(*options); }); });

  CLI::App* gc = cache->add_subcommand(
      "gc", "Trim the cache to its quota, least recently used first; remove leftover files");
  add_common_options(*gc, *options);
  gc->add_option("--max-size", options->max_size,
                 "Quota to trim to (bytes, or with K, M, G, T: powers of 1024, e.g. 512M or 1.5G; "
                 "default $ZEROJIT_CACHE_MAX_BYTES or 1G)");
  gc->callback([options, &context] { run_reporting(context, [&] { return run_gc(*options); }); });

  CLI::App* clear = cache->add_subcommand(
      "clear", "Remove every entry (entries other processes are reading are left)");
  add_common_options(*clear, *options);
  clear->callback(
      [options, &context] { run_reporting(context, [&] { return run_clear(*options); }); });

  CLI::App* explain = cache->add_subcommand(
      "explain",
      "For each key of the manifest: hit, or which identity components differ from the nearest "
      "entry of its kernel");
  add_common_options(*explain, *options);
  explain->add_option("--arch", options->arch, "Target arch")->capture_default_str();
  explain->add_option("--kernel", options->kernel, "Only this kernel");
  explain->add_option("--key", options->key, "Only keys whose text contains this");
  explain->add_option("--nvrtc-version", options->nvrtc_version,
                      "NVRTC version to explain for (default: this machine's)");
  explain->add_flag("--misses", options->misses_only, "Only keys that miss");
  if (context.add_manifest_options) context.add_manifest_options(*explain);
  explain->callback([options, &context] {
    run_reporting(context, [&] { return run_explain(*options, context); });
  });
}

}  // namespace zerojit::tool

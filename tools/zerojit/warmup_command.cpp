#include "warmup_command.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "cache_command.hpp"
#include "exit_codes.hpp"
#include "json_output.hpp"
#include "option_values.hpp"
#include "ready_file.hpp"
#include "terminal.hpp"
#include "zerojit/compiler.hpp"
#include "zerojit/cuda.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/metrics.hpp"
#include "zerojit/runtime.hpp"

namespace zerojit::tool {
namespace {

using nlohmann::json;

std::string first_lines(const std::string& text, int lines) {
  std::size_t end = 0;
  for (int i = 0; i < lines && end != std::string::npos; ++i) {
    end = text.find('\n', end == 0 ? 0 : end + 1);
  }
  return end == std::string::npos ? text : text.substr(0, end) + "\n  ...";
}

// A pack built with --compile-only --cache-dir must serve its whole manifest: every key's
// entry in the pack's own root, verified. A full disk, a quota or a read-only directory can
// leave keys out while each compile succeeded; that is a failure naming them (exit 5).
std::optional<ToolError> incomplete_pack(const Manifest& manifest, const std::string& arch,
                                         const std::string& directory, json& missing) {
  DiskCache* cache = installed_disk_cache();
  if (cache == nullptr) return std::nullopt;
  std::string listed;
  for (const ManifestEntry& entry : manifest.entries) {
    const ProgramIdentity identity = Runtime::instance().identity_of(entry.program(), arch);
    std::optional<CacheEntryInfo> found = cache->root_entry(identity);
    if (!found) {
      // Served by a read-only layer (--layer, ZEROJIT_CACHE_READONLY_DIRS): the pack gets a
      // copy, so that it holds its whole manifest by itself.
      if (const std::optional<CompiledArtifact> layered = cache->find(identity)) {
        cache->publish(*layered);
        found = cache->root_entry(identity);
      }
    }
    if (found && !found->busy && found->problem == EntryProblem::none) continue;
    const std::string why = !found ? "missing"
                            : found->busy
                                ? "busy: " + found->detail
                                : std::string(to_string(found->problem)) + ": " + found->detail;
    missing.push_back({{"kernel", entry.kernel->name()},
                       {"key", entry.key_text},
                       {"identity", identity.hex()},
                       {"problem", why}});
    listed += "\n  " + entry.kernel->name() + " [" + entry.key_text + "]: " + why;
  }
  if (missing.empty()) return std::nullopt;
  return ToolError{kExitFailure,
                   "the pack in " + directory +
                       " is incomplete: " + std::to_string(missing.size()) + " of " +
                       std::to_string(manifest.size()) + " keys are not in it" + listed,
                   "see the cache warnings above (a full disk, a quota smaller than the pack, "
                   "permissions); free space or raise ZEROJIT_CACHE_MAX_BYTES, then run the same "
                   "warmup again: it compiles only what is missing"};
}

// What the files of --ready-file and --metrics-file need from the warmup, taken while its
// kernels are alive (a family's kernels die with its Selection, and their counters with them).
struct WarmupOutcome {
  bool ran = false;  // the registry's warmup ran (it may have failed)
  std::string metrics;
  nlohmann::ordered_json ready;
};

// FNV-1a (64 bits) of the warmed keys' "kernel\tkey\n" lines, sorted and each once: equal
// wherever the same keys were warmed (zerojit.warmup's ready file computes the same). Not a
// security digest; the compiled binaries have their own identities.
std::string manifest_digest(const WarmupReport& report) {
  std::set<std::string> lines;
  for (const KeyReport& key : report.keys) lines.insert(key.kernel + "\t" + key.key + "\n");
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const std::string& line : lines) {
    for (unsigned char c : line) {
      hash ^= c;
      hash *= 0x100000001b3ULL;
    }
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return std::string("fnv1a64:") + text;
}

std::string join_devices(const std::vector<int>& devices) {
  std::string text;
  for (int d : devices) text += (text.empty() ? "" : ", ") + std::to_string(d);
  return text;
}

}  // namespace

void select(const Family& family, const OptionValues& values,
            const std::optional<std::string>& arch, Selection& out) {
  out.family = &family;
  out.configuration = family.configure(values, arch);
  if (out.configuration.register_warmup) out.configuration.register_warmup(out.registry);
}

Manifest checked_manifest(const WarmupRegistry& registry) {
  try {
    return registry.manifest();
  } catch (const Error& error) {
    throw ToolError{kExitUsage,
                    std::string("this configuration needs a kernel specialization the kernels "
                                "cannot build: ") +
                        error.what(),
                    "change the option named above to one the kernels support (for DSv4, spec "
                    "section 8 lists the domains)"};
  }
}

namespace {

// What warmup reads of the command line; `no_gpu_reason` says why nothing will be loaded, when
// the warmup is not compile-only and no device is there.
WarmupOptions warmup_options(const WarmupCommand& command, const std::string& arch,
                             std::string& no_gpu_reason) {
  WarmupOptions options;
  options.arch = arch;
  options.jobs = command.jobs;
  options.compile_only = command.compile_only;
  options.compile_processes = !command.in_process;
  options.progress = command.json ? ProgressStyle::none : ProgressStyle::automatic;
  if (!command.compile_only) {
    options.devices = selected_devices(command.devices);
    if (cuda::device_count() == 0) {
      no_gpu_reason = cuda::driver_available() ? "the driver reports no device"
                                               : cuda::driver_unavailable_reason();
    }
  }
  return options;
}

// The keys of the files of --also, learned into the registry (a missed key compiles ahead of
// time from now on); returns how many misses they held.
std::size_t learn_misses(const WarmupCommand& command, WarmupRegistry& registry) {
  std::size_t learned = 0;
  for (const std::string& file : command.also) {
    const MissesFile misses = read_misses_for_tool(file, "warmup --also");
    learned += misses.misses.size();
    for (const std::string& note : registry.add_learned(misses)) print_warning(file + ": " + note);
  }
  return learned;
}

void check_arch(const std::string& arch) {
  try {
    // With NVRTC loaded already (no memo of its version), ask it now: one error up front, not
    // one a key. Otherwise a compile that needs it says the same (failing_for_unsupported_arch).
    if (nvrtc_loaded()) {
      check_arch_supported(arch);
    } else {
      validate_arch(arch);
    }
  } catch (const Error& error) {
    throw ToolError{kExitUsage, error.what(), "pass --arch sm_90a (H100/H200) or sm_100a (B200)"};
  }
}

// What a finished warmup failed at, in the order it is worth saying: no NVRTC, an arch it does
// not support, keys that did not compile, then a pack that does not hold its whole manifest.
std::optional<ToolError> warmup_failure(const WarmupCommand& command, const WarmupReport& report,
                                        const Manifest& manifest, const std::string& arch,
                                        json& pack_missing) {
  std::optional<ToolError> failure = failing_for_want_of_nvrtc(report);
  if (!failure) failure = failing_for_unsupported_arch(report, arch);
  if (failure) return failure;  // said once (the progress lines already named each key)
  if (!report.ok()) {
    return ToolError{kExitCompileFailure,
                     std::to_string(report.failed()) + " of " +
                         std::to_string(report.total_keys()) + " keys failed to compile",
                     compile_failure_advice(report)};
  }
  if (command.compile_only && !command.cache.cache_dir.empty()) {
    return incomplete_pack(manifest, arch, command.cache.cache_dir, pack_missing);
  }
  return std::nullopt;
}

// The --json document's result: the report, with what the tool knows besides.
json warmup_json(const WarmupCommand& command, const Selection& selection,
                 const WarmupReport& report, bool kept, std::size_t learned,
                 const json& pack_missing) {
  json result = parse_library_json(report.to_json());
  result["family"] = selection.family->name;
  result["configuration"] = parse_library_json(selection.configuration.json);
  result["cache"] = describe_cache();
  result["cache_writable"] = kept;
  if (const DiskCache* disk = installed_disk_cache()) {
    // What was compiled but could not be kept: warned once on standard error, counted here.
    const DiskCacheCounters counters = disk->counters();
    result["disk_cache"] = {{"published", counters.published},
                            {"write_failures", counters.write_failures},
                            {"not_saved", counters.not_saved}};
  }
  result["compile_only"] = command.compile_only;
  result["learned_misses"] = learned;
  if (!pack_missing.empty()) result["pack_missing"] = pack_missing;
  if (const RemoteCache* remote = installed_remote_cache()) {
    result["remote_cache"] = parse_library_json(to_json(remote->counters()));
  }
  return result;
}

// The per-kernel table (and with --verbose the per-key one).
void print_tables(const WarmupReport& report, bool verbose, const Style& out) {
  Table table({{"kernel"},
               {"keys", Table::Align::right},
               {"memory", Table::Align::right},
               {"disk", Table::Align::right},
               {"compiled", Table::Align::right},
               {"failed", Table::Align::right},
               {"seconds", Table::Align::right}});
  for (const KernelReport& k : report.kernels) {
    table.add_row({k.kernel, std::to_string(k.keys), std::to_string(k.from_memory),
                   std::to_string(k.from_disk), std::to_string(k.compiled),
                   k.failed ? out.red(std::to_string(k.failed)) : "0", fixed(k.seconds, 3)});
  }
  table.add_footer({"total (" + std::to_string(report.kernels.size()) + " kernels)",
                    std::to_string(report.total_keys()), std::to_string(report.from_memory()),
                    std::to_string(report.from_disk()), std::to_string(report.compiled()),
                    report.failed() ? out.red(std::to_string(report.failed())) : "0",
                    fixed(report.wall_seconds, 3) + " wall"});
  std::printf("\n");
  table.print(stdout, out);
  if (verbose && !report.keys.empty()) {
    Table keys({{"kernel"}, {"arch"}, {"origin"}, {"seconds", Table::Align::right}, {"key"}});
    for (const KeyReport& key : report.keys) {
      keys.add_row({key.kernel, key.arch,
                    key.error.empty() ? std::string(to_string(key.origin)) : out.red("FAILED"),
                    fixed(key.seconds, 3), key.key});
    }
    std::printf("\n");
    keys.print(stdout, out);
  }
}

// The cache tiers' lines: the remote's counters, and compiled kernels the disk could not keep.
void print_cache_lines(const Style& out) {
  if (const RemoteCache* remote = installed_remote_cache()) {
    const RemoteCacheCounters c = remote->counters();
    std::printf(
        "\n%s %llu hits, %llu misses, %llu published, %llu bad, %llu too large, %llu "
        "errors (%llu timeouts), %llu lock waits (%llu gave up), %llu backoffs\n",
        out.dim("remote cache:").c_str(), static_cast<unsigned long long>(c.hits),
        static_cast<unsigned long long>(c.misses), static_cast<unsigned long long>(c.published),
        static_cast<unsigned long long>(c.bad_entries),
        static_cast<unsigned long long>(c.too_large), static_cast<unsigned long long>(c.errors),
        static_cast<unsigned long long>(c.timeouts), static_cast<unsigned long long>(c.lock_waits),
        static_cast<unsigned long long>(c.lock_wait_timeouts),
        static_cast<unsigned long long>(c.backoffs));
  }
  if (const DiskCache* disk = installed_disk_cache()) {
    const DiskCacheCounters counters = disk->counters();
    const std::uint64_t lost = counters.write_failures + counters.not_saved;
    if (lost > 0) {
      std::printf(
          "\n%s %llu compiled kernel%s could not be kept on disk (the cache warning above "
          "says why); other processes will compile %s again\n",
          out.dim("disk cache:").c_str(), static_cast<unsigned long long>(lost),
          lost == 1 ? "" : "s", lost == 1 ? "it" : "them");
    }
  }
}

// What was built and loaded, then (without a failure) the closing "ok:" line.
void print_closing(const WarmupCommand& command, const WarmupReport& report,
                   const std::string& no_gpu_reason, bool kept, const std::string& not_kept,
                   const std::optional<ToolError>& failure, const Style& out) {
  std::printf("\n");
  std::string archs;
  for (const auto& a : report.archs) archs += (archs.empty() ? "" : ", ") + a;
  if (!report.devices.empty()) {
    std::printf("built for %s; loaded on device%s %s\n", archs.c_str(),
                report.devices.size() > 1 ? "s" : "", join_devices(report.devices).c_str());
  } else if (command.compile_only) {
    std::printf("built for %s; loaded nothing (--compile-only)\n", archs.c_str());
  } else {
    std::printf("built for %s only; loaded nothing (no GPU: %s)\n", archs.c_str(),
                no_gpu_reason.c_str());
  }
  std::fflush(stdout);
  if (failure) throw *failure;
  if (command.compile_only && !command.cache.cache_dir.empty()) {
    std::printf(
        "%s ahead-of-time pack in %s: %d keys for %s; mount it read-only with "
        "--layer %s (or ZEROJIT_CACHE_READONLY_DIRS)\n",
        out.green("ok:").c_str(), command.cache.cache_dir.c_str(), report.total_keys(),
        archs.c_str(), command.cache.cache_dir.c_str());
  } else if (!report.devices.empty()) {
    std::printf("%s %d keys loaded%s\n", out.green("ok:").c_str(), report.total_keys(),
                report.monitor_armed ? "; monitor armed" : "");
  } else {
    std::printf("%s %d keys built\n", out.green("ok:").c_str(), report.total_keys());
    if (!kept) print_note("nothing was kept on disk (" + not_kept + "); pass --cache-dir DIR");
  }
}

int warm(const WarmupCommand& command, WarmupOutcome& outcome) {
  Selection selection;
  select(*command.family, command.values, command.arch, selection);
  const std::size_t learned = learn_misses(command, selection.registry);
  install_cache(command.cache, "warmup");
  require_nvrtc();
  const std::string arch = selection.configuration.arch;
  check_arch(arch);
  std::string no_gpu_reason;
  const WarmupOptions options = warmup_options(command, arch, no_gpu_reason);
  const Style out = Style::for_stream(stdout);
  if (!command.json) {
    std::printf("%s %s\n", out.bold(program_name() + " warmup:").c_str(),
                selection.configuration.description.c_str());
    std::printf("%s %s\n", out.dim("cache:").c_str(), describe_cache().c_str());
    std::fflush(stdout);
  }
  // A space the kernels reject is a usage error.
  const Manifest manifest = checked_manifest(selection.registry);
  std::string not_kept;
  const bool kept = cache_is_writable(not_kept);
  if (command.compile_only && !command.cache.cache_dir.empty() && !kept) {
    // Said before anything compiles: a pack nobody can write would be compiled for nothing.
    throw ToolError{kExitFailure,
                    "no pack can be written to " + command.cache.cache_dir + ": " + not_kept,
                    "pass --cache-dir a directory this user can create and write (nothing was "
                    "compiled)"};
  }
  const WarmupReport report = selection.registry.warmup(options);
  outcome.ran = true;
  if (!command.metrics_file.empty()) outcome.metrics = prometheus_text();
  outcome.ready = {{"ready", true},
                   {"time", utc_now()},
                   {"family", selection.family->name},
                   {"configuration", selection.configuration.description},
                   {"keys", report.total_keys()},
                   {"archs", report.archs},
                   {"devices", report.devices},
                   {"compile_only", command.compile_only},
                   {"manifest_digest", manifest_digest(report)}};
  json pack_missing = json::array();
  const std::optional<ToolError> failure =
      warmup_failure(command, report, manifest, arch, pack_missing);
  for (const KeyReport& key : report.keys) {
    if (!key.error.empty() && (!failure || failure->exit_code == kExitCompileFailure)) {
      std::fprintf(stderr, "%s %s [%s] for %s:\n  %s\n",
                   Style::for_stream(stderr).red("compile failed:").c_str(), key.kernel.c_str(),
                   key.key.c_str(), key.arch.c_str(), first_lines(key.error, 30).c_str());
    }
  }
  if (command.json) {
    json result = warmup_json(command, selection, report, kept, learned, pack_missing);
    if (failure) print_error(failure->message, failure->hint);
    print_json(failure ? failure_document("warmup", *failure, std::move(result))
                       : success_document("warmup", std::move(result)));
    return failure ? failure->exit_code : kExitOk;
  }
  print_tables(report, command.verbose, out);
  print_cache_lines(out);
  print_closing(command, report, no_gpu_reason, kept, not_kept, failure, out);
  return kExitOk;
}

}  // namespace

int run_warmup(const WarmupCommand& command) {
  // Removed first, so that nothing reads a ready file from an earlier warmup while this one
  // runs or after it failed, whatever the failure (bad options of the family, no NVRTC, ...).
  if (!command.ready_file.empty()) remove_ready_file(command.ready_file);
  WarmupOutcome outcome;
  const auto write_metrics = [&] {
    if (outcome.ran && !command.metrics_file.empty()) {
      write_file_atomically(command.metrics_file, outcome.metrics, "metrics file");
    }
  };
  int code = kExitOk;
  try {
    code = warm(command, outcome);
  } catch (...) {
    // A failed warmup's counters say what it did (compiles, disk hits) all the same; the
    // warmup's own failure is the one reported.
    try {
      write_metrics();
    } catch (const ToolError& error) {
      print_warning(error.message);
    }
    throw;
  }
  write_metrics();
  if (code == kExitOk && !command.ready_file.empty()) {
    write_file_atomically(command.ready_file, outcome.ready.dump(2) + "\n", "ready file");
  }
  return code;
}

int run_keys(const KeysCommand& command) {
  Selection selection;
  select(*command.family, command.values, command.arch, selection);
  const Manifest manifest = checked_manifest(selection.registry);
  std::vector<std::string> kernels;
  for (const ManifestEntry& entry : manifest.entries) {
    if (kernels.empty() || kernels.back() != entry.kernel->name())
      kernels.push_back(entry.kernel->name());
  }
  if (command.json) {
    json keys = json::array();
    for (const ManifestEntry& entry : manifest.entries) {
      keys.push_back({{"kernel", entry.kernel->name()},
                      {"key", parse_library_json(entry.key_json)},
                      {"text", entry.key_text}});
    }
    json dead = json::array();
    for (const auto& axis : manifest.dead_axes) {
      dead.push_back({{"kernel", axis.kernel}, {"registration", axis.tag}, {"axis", axis.axis}});
    }
    print_json(success_document(
        "keys", {{"family", selection.family->name},
                 {"configuration", parse_library_json(selection.configuration.json)},
                 {"arch", selection.configuration.arch},
                 {"count", manifest.size()},
                 {"kernels", kernels},
                 {"keys", keys},
                 {"dead_axes", dead}}));
    return kExitOk;
  }
  const Style out = Style::for_stream(stdout);
  std::printf("%s %s\n\n", out.bold(program_name() + " keys:").c_str(),
              selection.configuration.description.c_str());
  Table table({{"kernel"}, {"key"}});
  for (const ManifestEntry& entry : manifest.entries) {
    table.add_row({entry.kernel->name(), entry.key_text});
  }
  if (!table.empty()) table.print(stdout, out);
  std::printf("\n%zu keys in %zu kernels\n", manifest.size(), kernels.size());
  if (manifest.dead_axes.empty()) {
    std::printf("dead axes: none\n");
  } else {
    std::printf("%s (axes whose values never change a key: they only cost expansion time)\n",
                out.yellow("dead axes:").c_str());
    for (const auto& axis : manifest.dead_axes) {
      std::printf("  %s [%s]: %s\n", axis.kernel.c_str(), axis.tag.c_str(), axis.axis.c_str());
    }
  }
  return kExitOk;
}

}  // namespace zerojit::tool

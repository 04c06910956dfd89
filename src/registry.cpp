#include "zerojit/registry.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "json_text.hpp"
#include "progress.hpp"
#include "zerojit/compile_pool.hpp"
#include "zerojit/cuda.hpp"
#include "zerojit/parallel.hpp"
#include "zerojit/program.hpp"

namespace zerojit {
namespace {

WarmupReport run_warmup(const Manifest& manifest, const WarmupOptions& options);

}  // namespace

std::vector<std::string> Manifest::lines() const {
  std::vector<std::string> out;
  for (const auto& entry : entries) out.push_back(entry.kernel->name() + " " + entry.key_text);
  return out;
}

std::string Manifest::to_json() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& entry : entries) {
    out.push_back(
        {{"kernel", entry.kernel->name()}, {"key", nlohmann::ordered_json::parse(entry.key_json)}});
  }
  return json_text(out);
}

Manifest WarmupRegistry::manifest() const {
  // Group by kernel in first-registration order; dedupe keys per kernel in first-seen order.
  std::vector<KernelBase*> kernel_order;
  std::map<KernelBase*, std::vector<ManifestEntry>> per_kernel;
  std::set<std::pair<KernelBase*, std::string>> seen;
  Manifest manifest;
  for (const auto& registration : registrations_) {
    std::vector<ManifestEntry> entries;
    std::vector<std::string> dead_axes;
    registration.expand(entries, dead_axes);
    for (const auto& axis : dead_axes) {
      manifest.dead_axes.push_back({registration.kernel->name(), registration.tag, axis});
    }
    if (!per_kernel.count(registration.kernel)) kernel_order.push_back(registration.kernel);
    auto& bucket = per_kernel[registration.kernel];
    for (auto& entry : entries) {
      if (seen.emplace(entry.kernel, entry.key_text).second) bucket.push_back(std::move(entry));
    }
  }
  for (KernelBase* kernel : kernel_order) {
    for (auto& entry : per_kernel[kernel]) manifest.entries.push_back(std::move(entry));
  }
  return manifest;
}

std::vector<std::string> WarmupRegistry::add_learned(const MissesFile& misses) {
  std::vector<std::string> notes = misses.skipped;
  std::map<std::string, KernelBase*> kernels;
  for (KernelBase* kernel : Runtime::instance().kernels()) kernels[kernel->name()] = kernel;
  for (const LearnedMiss& miss : misses.misses) {
    const auto found = kernels.find(miss.kernel);
    if (found == kernels.end()) {
      notes.push_back("kernel " + miss.kernel + " [" + miss.key_text +
                      "]: no such kernel in this process; not warmed");
      continue;
    }
    std::optional<NamedKey> key = found->second->key_named(miss.key_text);
    if (!key) {
      notes.push_back("kernel " + miss.kernel + " [" + miss.key_text +
                      "]: not a key this kernel can read back; not warmed");
      continue;
    }
    KernelBase* kernel = found->second;
    add_expansion(*kernel, "learned miss " + miss.key_text,
                  [kernel, key = std::move(*key)](std::vector<ManifestEntry>& entries,
                                                  std::vector<std::string>&) {
                    entries.push_back({kernel, key.key_text, key.key_json, key.warm, key.program});
                  });
  }
  return notes;
}

WarmupReport WarmupRegistry::warmup(const WarmupOptions& options) const {
  WarmupReport report;
  {
    Monitor::WarmupScope scope;  // warmup's own compiles are not runtime JIT
    report = run_warmup(manifest(), options);
  }
  if (options.arm_monitor && report.ok() && Monitor::instance().mode() != MonitorMode::off) {
    Monitor::instance().arm();
    report.monitor_armed = true;
  }
  return report;
}

namespace {

// Bytes of source and included headers the entry's program compiles; 0 when unknown (the
// compile itself then reports any problem).
std::size_t estimated_compile_cost(const ManifestEntry& entry) {
  if (!entry.program) return 0;
  try {
    const Program program = entry.program();
    const ResolvedSource resolved = resolve_program_source(program);
    std::size_t bytes = resolved.source.size();
    for (const ResolvedHeader& header : resolved.headers) bytes += header.content.size();
    return bytes;
  } catch (const std::exception&) {
    return 0;
  }
}

// The devices to load on: every visible one unless the options name some; none when the
// warmup only compiles.
std::vector<int> warmup_devices(const WarmupOptions& options) {
  std::vector<int> devices;
  if (options.compile_only) return devices;
  Backend& backend = Runtime::instance().backend();
  const int count = backend.device_count();
  if (options.devices.empty()) {
    for (int d = 0; d < count; ++d) devices.push_back(d);
    return devices;
  }
  for (int d : options.devices) {
    if (d < 0 || d >= count) {
      throw Error("warmup: device " + std::to_string(d) + " does not exist (" +
                  std::to_string(count) + " visible)");
    }
    devices.push_back(d);
  }
  return devices;
}

// One compile per (key, arch), loaded on each device of that arch. Without devices, the one
// arch asked for, with nothing to load on.
std::map<std::string, std::vector<int>> group_devices_by_arch(const std::vector<int>& devices,
                                                              const std::string& fallback_arch) {
  std::map<std::string, std::vector<int>> devices_by_arch;
  for (int d : devices) devices_by_arch[Runtime::instance().target_arch(d)].push_back(d);
  if (devices_by_arch.empty()) {
    validate_arch(fallback_arch);
    devices_by_arch[fallback_arch] = {};
  }
  return devices_by_arch;
}

struct Job {
  const ManifestEntry* entry;
  const std::string* arch;
  const std::vector<int>* devices;
};

std::vector<Job> warmup_jobs(const Manifest& manifest,
                             const std::map<std::string, std::vector<int>>& devices_by_arch) {
  std::vector<Job> jobs;
  for (const auto& [arch, arch_devices] : devices_by_arch) {
    for (const auto& entry : manifest.entries) jobs.push_back({&entry, &arch, &arch_devices});
  }
  return jobs;
}

// Longest first: a long compile started last would leave the other workers idle at the end.
// The size of the source with its headers stands in for the compile time (measured: the
// compressor kernels, which share the largest header, are the slowest keys). The report
// keeps the manifest's order, so this is only the order the jobs start in.
std::vector<std::size_t> longest_first(const Manifest& manifest, std::size_t job_count) {
  std::vector<std::size_t> cost(manifest.entries.size(), 0);
  for (std::size_t i = 0; i < manifest.entries.size(); ++i)
    cost[i] = estimated_compile_cost(manifest.entries[i]);
  std::vector<std::size_t> order(job_count);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return cost[a % cost.size()] > cost[b % cost.size()];
  });
  return order;
}

// Once one answer is yes, the caller is asked no more: every key not yet started is skipped.
bool warmup_cancelled(const WarmupOptions& options, std::atomic<bool>& cancelled) {
  if (!cancelled.load() && options.cancel_requested) {
    bool requested = true;  // a callback that throws is taken as a request to stop
    try {
      requested = options.cancel_requested();
    } catch (...) {
    }
    if (requested) cancelled.store(true);
  }
  return cancelled.load();
}

// A key's failure is its report's, never the warmup's: the other keys still warm. Returns
// false when the key was deferred (another process holds its compile lock, and this call was
// made under DeferHeldKeys): it is neither done nor reported yet, and must be warmed again.
bool warm_key(const Job& job, const WarmupOptions& options, std::atomic<bool>& cancelled,
              Progress& progress, KeyReport& key) {
  key.kernel = job.entry->kernel->name();
  key.key = job.entry->key_text;
  key.arch = *job.arch;
  if (job.entry->program) {
    try {
      key.language = job.entry->program().language;
    } catch (const std::exception&) {
      // A program that cannot be built fails its warm below, saying why.
    }
  }
  if (warmup_cancelled(options, cancelled)) {
    key.error = "warmup cancelled before this key started";
    return true;
  }
  const auto key_start = std::chrono::steady_clock::now();
  bool deferred = false;
  try {
    const WarmResult result = job.entry->warm(*job.arch, *job.devices);
    deferred = result.deferred;
    key.origin = result.origin;
    key.compile_seconds = result.compile_seconds;
  } catch (const std::exception& error) {
    key.error = error.what();
  }
  // A deferred key's two tries add up to its time.
  key.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - key_start).count();
  if (deferred) return false;
  progress.finished(key);
  return true;
}

// The jobs in `order`, on up to `jobs` threads, each key once. First every key is tried
// without waiting for another process (DeferHeldKeys): a key whose compile lock another
// process holds goes to the end of the list, so that N processes warming one cold cache split
// the keys between them instead of all waiting on whichever locked each key first. A thread
// that runs out of fresh keys then takes the deferred ones, this time waiting for their
// holders (each wait bounded by the store's lock timeout) and loading what they published, or
// compiling a key whose holder failed or died without publishing it. Returns how many keys
// were deferred.
int warm_all(const std::vector<Job>& jobs, const std::vector<std::size_t>& order, int threads,
             const WarmupOptions& options, std::atomic<bool>& cancelled, Progress& progress,
             std::vector<KeyReport>& keys) {
  std::atomic<std::size_t> next{0};
  std::mutex deferred_mutex;
  std::vector<std::size_t> deferred;  // job indices, in the order they were deferred
  std::size_t next_deferred = 0;
  int deferred_count = 0;
  auto take_deferred = [&]() -> std::optional<std::size_t> {
    std::lock_guard lock(deferred_mutex);
    if (next_deferred == deferred.size()) return std::nullopt;
    return deferred[next_deferred++];
  };
  // Each thread drains the fresh keys, then the deferred ones. A key deferred by another
  // thread after this one has finished is still taken: by the thread that deferred it, which
  // looks at the deferred list only after its own fresh keys.
  parallel_for(static_cast<std::size_t>(threads), threads, [&](std::size_t) {
    for (std::size_t position = next.fetch_add(1); position < jobs.size();
         position = next.fetch_add(1)) {
      const std::size_t i = order[position];
      bool done = false;
      {
        DeferHeldKeys defer;
        done = warm_key(jobs[i], options, cancelled, progress, keys[i]);
      }
      if (!done) {
        std::lock_guard lock(deferred_mutex);
        deferred.push_back(i);
        ++deferred_count;
      }
    }
    while (const std::optional<std::size_t> i = take_deferred()) {
      warm_key(jobs[*i], options, cancelled, progress, keys[*i]);  // waits: never deferred
    }
  });
  return deferred_count;
}

// Per kernel, in the order the kernels first appear among the keys.
std::vector<KernelReport> kernel_totals(const std::vector<KeyReport>& keys) {
  std::vector<KernelReport> kernels;
  for (const KeyReport& key : keys) {
    auto it = std::find_if(kernels.begin(), kernels.end(),
                           [&](const KernelReport& k) { return k.kernel == key.kernel; });
    if (it == kernels.end()) {
      kernels.push_back(KernelReport{key.kernel});
      it = std::prev(kernels.end());
    }
    ++it->keys;
    it->seconds += key.seconds;
    if (!key.error.empty()) {
      ++it->failed;
    } else if (key.origin == ArtifactOrigin::memory) {
      ++it->from_memory;
    } else if (key.origin == ArtifactOrigin::disk) {
      ++it->from_disk;
    } else {
      ++it->compiled;
    }
  }
  return kernels;
}

WarmupReport run_warmup(const Manifest& manifest, const WarmupOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  WarmupReport report;

  const std::vector<int> devices = warmup_devices(options);
  const std::map<std::string, std::vector<int>> devices_by_arch =
      group_devices_by_arch(devices, options.arch);
  for (const auto& [arch, unused] : devices_by_arch) {
    // Once, up front, where NVRTC is loaded already; a warmup served from disk must not load
    // it only to ask (the compile path asks the same before each compile).
    if (nvrtc_loaded()) check_arch_supported(arch);
    report.archs.push_back(arch);
  }
  report.devices = devices;

  const std::vector<Job> jobs = warmup_jobs(manifest, devices_by_arch);
  const std::vector<std::size_t> order = longest_first(manifest, jobs.size());
  report.keys.resize(jobs.size());
  const int workers = static_cast<int>(std::min<std::size_t>(
      jobs.size(),
      static_cast<std::size_t>(options.jobs > 0 ? options.jobs : default_job_count())));
  std::optional<CompileProcessPool> pool;
  std::optional<Runtime::CompileExecutorInstallation> installed;
  if (options.compile_processes && workers > 1) {
    pool.emplace(workers);  // forks at the first compile only
    installed.emplace(*pool);
  }
  Progress progress(options.progress, jobs.size(), options.on_progress);
  std::atomic<bool> cancelled{false};
  report.deferred = warm_all(jobs, order, workers, options, cancelled, progress, report.keys);

  report.cancelled = cancelled.load();
  if (pool) {
    report.compile_workers = pool->workers();
    report.compile_fallbacks = pool->fallbacks();
  }
  report.kernels = kernel_totals(report.keys);
  report.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

template <class Count>
int sum_over(const std::vector<KernelReport>& kernels, Count count) {
  int total = 0;
  for (const auto& kernel : kernels) total += count(kernel);
  return total;
}
}  // namespace

int WarmupReport::total_keys() const {
  return sum_over(kernels, [](const KernelReport& k) { return k.keys; });
}
int WarmupReport::from_memory() const {
  return sum_over(kernels, [](const KernelReport& k) { return k.from_memory; });
}
int WarmupReport::from_disk() const {
  return sum_over(kernels, [](const KernelReport& k) { return k.from_disk; });
}
int WarmupReport::compiled() const {
  return sum_over(kernels, [](const KernelReport& k) { return k.compiled; });
}
int WarmupReport::failed() const {
  return sum_over(kernels, [](const KernelReport& k) { return k.failed; });
}

std::string WarmupReport::summary_line() const {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer,
                "%d keys in %zu kernels: %d compiled, %d from disk, %d from memory, %d failed; "
                "%.3f s",
                total_keys(), kernels.size(), compiled(), from_disk(), from_memory(), failed(),
                wall_seconds);
  return cancelled ? std::string(buffer) + " (cancelled)" : std::string(buffer);
}

std::string WarmupReport::to_json() const {
  nlohmann::ordered_json kernel_list = nlohmann::ordered_json::array();
  for (const KernelReport& k : kernels) {
    kernel_list.push_back({{"kernel", k.kernel},
                           {"keys", k.keys},
                           {"compiled", k.compiled},
                           {"from_disk", k.from_disk},
                           {"from_memory", k.from_memory},
                           {"failed", k.failed},
                           {"seconds", k.seconds}});
  }
  nlohmann::ordered_json key_list = nlohmann::ordered_json::array();
  for (const KeyReport& k : keys) {
    nlohmann::ordered_json key = {{"kernel", k.kernel},
                                  {"key", k.key},
                                  {"arch", k.arch},
                                  {"origin", k.error.empty() ? to_string(k.origin) : "failed"},
                                  {"seconds", k.seconds}};
    if (!k.error.empty()) key["error"] = k.error;
    key_list.push_back(std::move(key));
  }
  return json_text({{"archs", archs},
                    {"devices", devices},
                    {"wall_seconds", wall_seconds},
                    {"monitor_armed", monitor_armed},
                    {"compile_workers", compile_workers},
                    {"compile_fallbacks", compile_fallbacks},
                    {"cancelled", cancelled},
                    {"deferred", deferred},
                    {"totals",
                     {{"keys", total_keys()},
                      {"compiled", compiled()},
                      {"from_disk", from_disk()},
                      {"from_memory", from_memory()},
                      {"failed", failed()}}},
                    {"kernels", std::move(kernel_list)},
                    {"keys", std::move(key_list)}});
}

}  // namespace zerojit

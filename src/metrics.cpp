#include "zerojit/metrics.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>

#include "zerojit/runtime.hpp"

namespace zerojit {
namespace {

// One per-kernel counter: its name, its help, and where KernelCounters keeps its value.
struct KernelMetric {
  const char* name;
  const char* help;
  double (*value)(const KernelCounters&);
};

template <std::uint64_t KernelCounters::*field>
double whole(const KernelCounters& c) {
  return static_cast<double>(c.*field);
}

const KernelMetric kKernelMetrics[] = {
    {"zerojit_kernel_hits_total", "Launches served by the kernel's in-memory executor cache.",
     whole<&KernelCounters::hits>},
    {"zerojit_kernel_misses_total",
     "Executor-cache misses of the kernel (each a compile or a load).",
     whole<&KernelCounters::misses>},
    {"zerojit_kernel_compiles_total", "Compiles of the kernel's keys in this process.",
     whole<&KernelCounters::compiles>},
    {"zerojit_kernel_compile_seconds_total", "Seconds spent compiling the kernel's keys.",
     [](const KernelCounters& c) { return c.compile_seconds; }},
    {"zerojit_kernel_disk_loads_total",
     "Compiled artifacts of the kernel read from the artifact store (disk or remote cache).",
     whole<&KernelCounters::disk_loads>},
    {"zerojit_kernel_module_loads_total", "Modules of the kernel loaded onto a device.",
     whole<&KernelCounters::loads>},
    {"zerojit_kernel_runtime_jit_total",
     "Compiles and module loads of the kernel after warmup armed the monitor.",
     whole<&KernelCounters::runtime_jit>},
    {"zerojit_kernel_fallback_launches_total",
     "Missed calls of the kernel served by its warmed fallback key.",
     whole<&KernelCounters::fallback_launches>},
    {"zerojit_kernel_background_compiles_total",
     "Missed keys of the kernel compiled in the background.",
     whole<&KernelCounters::background_compiles>},
    {"zerojit_kernel_background_failures_total",
     "Background compiles of the kernel that failed (its fallback kept serving).",
     whole<&KernelCounters::background_failures>},
};

struct TierMetric {
  const char* name;
  const char* help;
  std::uint64_t value;
};

MetricFamily counter(std::string name, std::string help, double value) {
  return {std::move(name), "counter", std::move(help), {{{}, value}}};
}

void add_tier(std::vector<MetricFamily>& families, const std::string& prefix,
              std::initializer_list<TierMetric> metrics) {
  for (const TierMetric& m : metrics) {
    families.push_back(counter(prefix + m.name + "_total", m.help, static_cast<double>(m.value)));
  }
}

void add_disk(std::vector<MetricFamily>& families, const DiskCacheCounters& c) {
  add_tier(
      families, "zerojit_disk_cache_",
      {{"hits", "Disk cache lookups served by a verified entry.", c.hits},
       {"misses", "Disk cache lookups that found no usable entry.", c.misses},
       {"bad_entries", "Damaged, foreign or misnamed disk cache entries met.", c.bad_entries},
       {"published", "Entries written to the disk cache.", c.published},
       {"write_failures", "Entries not written (disk full, quota, permissions).", c.write_failures},
       {"evicted", "Entries removed to stay under the disk cache quota.", c.evicted},
       {"lock_waits", "Lookups that waited for another process's compile.", c.lock_waits},
       {"lock_timeouts", "Waits for another process's compile that gave up.", c.lock_timeouts},
       {"skipped_identities", "Identities served without the disk tier (locked too long).",
        c.skipped_identities},
       {"not_saved", "Compiled artifacts not written: the root cannot be written.", c.not_saved}});
}

void add_remote(std::vector<MetricFamily>& families, const RemoteCacheCounters& c) {
  add_tier(
      families, "zerojit_remote_cache_",
      {{"hits", "Verified entries fetched from the remote cache.", c.hits},
       {"misses", "Remote cache lookups that found no entry.", c.misses},
       {"bad_entries", "Remote entries that failed verification.", c.bad_entries},
       {"published", "Entries sent to the remote cache.", c.published},
       {"too_large", "Entries over the remote cache's size limit.", c.too_large},
       {"errors", "Failed remote cache operations.", c.errors},
       {"timeouts", "Remote cache operations that passed a timeout.", c.timeouts},
       {"lock_waits", "Identities another host was compiling when asked for.", c.lock_waits},
       {"lock_wait_timeouts", "Waits for another host's compile that gave up.",
        c.lock_wait_timeouts},
       {"backoffs", "Times the remote tier was left out after repeated failures.", c.backoffs},
       {"skipped", "Remote operations not tried (backing off or disabled).", c.skipped},
       {"host_code_refused", "Sound remote entries of host code not taken.", c.host_code_refused}});
}

std::string escaped(const std::string& text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// Whole numbers as integers (counts are exact up to 2^53), others with round-trip precision.
std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[40];
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    std::snprintf(text, sizeof text, "%.0f", value);
  } else {
    std::snprintf(text, sizeof text, "%.17g", value);
  }
  return text;
}

}  // namespace

MetricsSnapshot metrics_snapshot() {
  MetricsSnapshot snapshot;
  const Monitor& monitor = Monitor::instance();
  snapshot.kernels = monitor.counters();
  snapshot.mode = monitor.mode();
  snapshot.armed = monitor.armed();
  ArtifactStore* store = Runtime::instance().artifact_store().get();
  if (auto* disk = dynamic_cast<DiskCache*>(local_store_of(store))) {
    snapshot.disk = disk->counters();
  }
  if (RemoteCache* remote = remote_cache_of(store)) snapshot.remote = remote->counters();
  return snapshot;
}

std::vector<MetricFamily> metric_families(const MetricsSnapshot& snapshot) {
  // Sorted by name, one entry a name.
  std::map<std::string, KernelCounters> kernels;
  for (const KernelCounters& c : snapshot.kernels) {
    auto [at, fresh] = kernels.try_emplace(c.kernel, c);
    if (fresh) continue;
    KernelCounters& sum = at->second;
    sum.hits += c.hits;
    sum.misses += c.misses;
    sum.compiles += c.compiles;
    sum.compile_seconds += c.compile_seconds;
    sum.disk_loads += c.disk_loads;
    sum.loads += c.loads;
    sum.runtime_jit += c.runtime_jit;
    sum.fallback_launches += c.fallback_launches;
    sum.background_compiles += c.background_compiles;
    sum.background_failures += c.background_failures;
  }
  std::vector<MetricFamily> families;
  for (const KernelMetric& metric : kKernelMetrics) {
    MetricFamily family{metric.name, "counter", metric.help, {}};
    for (const auto& [name, c] : kernels) {
      family.samples.push_back({{{"kernel", name}}, metric.value(c)});
    }
    families.push_back(std::move(family));
  }
  families.push_back({"zerojit_monitor_armed",
                      "gauge",
                      "1 while the JIT monitor is armed (warmup succeeded), else 0.",
                      {{{}, snapshot.armed ? 1.0 : 0.0}}});
  MetricFamily mode{"zerojit_monitor_mode",
                    "gauge",
                    "The JIT monitor's mode: 1 for the current one, 0 for the others.",
                    {}};
  for (MonitorMode m :
       {MonitorMode::off, MonitorMode::warn, MonitorMode::error, MonitorMode::fallback}) {
    mode.samples.push_back({{{"mode", std::string(to_string(m))}}, m == snapshot.mode ? 1.0 : 0.0});
  }
  families.push_back(std::move(mode));
  if (snapshot.disk) add_disk(families, *snapshot.disk);
  if (snapshot.remote) add_remote(families, *snapshot.remote);
  return families;
}

std::string prometheus_text(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const MetricFamily& family : families) {
    out += "# HELP " + family.name + " " + escaped(family.help, false) + "\n";
    out += "# TYPE " + family.name + " " + family.type + "\n";
    for (const MetricSample& sample : family.samples) {
      out += family.name;
      if (!sample.labels.empty()) {
        out += '{';
        for (std::size_t i = 0; i < sample.labels.size(); ++i) {
          if (i > 0) out += ',';
          out += sample.labels[i].first + "=\"" + escaped(sample.labels[i].second, true) + "\"";
        }
        out += '}';
      }
      out += " " + number(sample.value) + "\n";
    }
  }
  return out;
}

std::string prometheus_text() { return prometheus_text(metric_families(metrics_snapshot())); }

}  // namespace zerojit

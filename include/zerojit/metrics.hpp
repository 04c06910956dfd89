// The process's counters in the Prometheus text exposition format (version 0.0.4): every
// kernel's monitor counters (monitor.hpp), the monitor's state, and the counters of the
// installed disk and remote cache tiers (disk_cache.hpp, remote_cache.hpp). docs/METRICS.md
// lists each metric. The families are data first and text second, so that a client library's
// collector (the Python module's zerojit.PrometheusCollector) builds its own families from
// the same values instead of parsing text.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zerojit/disk_cache.hpp"
#include "zerojit/monitor.hpp"
#include "zerojit/remote_cache.hpp"

namespace zerojit {

struct MetricSample {
  std::vector<std::pair<std::string, std::string>> labels;  // (name, value), in order
  double value = 0.0;
};

struct MetricFamily {
  std::string name;  // a counter's name ends in _total
  std::string type;  // "counter" or "gauge"
  std::string help;
  std::vector<MetricSample> samples;
};

// What the families are made of, read at one moment.
struct MetricsSnapshot {
  std::vector<KernelCounters> kernels;
  MonitorMode mode = MonitorMode::off;
  bool armed = false;
  std::optional<DiskCacheCounters> disk;      // absent: no disk tier installed
  std::optional<RemoteCacheCounters> remote;  // absent: no remote tier installed
};

// The live counters: Monitor::instance() and Runtime::instance()'s artifact store.
MetricsSnapshot metrics_snapshot();

// The families of a snapshot. Kernels of one name (two owners, or a kernel re-created) are
// summed into one sample: Prometheus refuses two samples with the same labels.
std::vector<MetricFamily> metric_families(const MetricsSnapshot& snapshot);

// The families as exposition text: HELP and TYPE lines, then the samples; label values
// escaped (backslash, double quote, newline). Ends with a newline.
std::string prometheus_text(const std::vector<MetricFamily>& families);
// The live counters as exposition text.
std::string prometheus_text();

}  // namespace zerojit

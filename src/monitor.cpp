#include "zerojit/monitor.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "zerojit/error.hpp"
#include "zerojit/kernel.hpp"
#include "zerojit/key.hpp"
#include "zerojit/runtime.hpp"

namespace zerojit {

std::string_view to_string(MonitorMode mode) {
  switch (mode) {
    case MonitorMode::off:
      return "off";
    case MonitorMode::warn:
      return "warn";
    case MonitorMode::error:
      return "error";
  }
  return "?";
}

std::optional<MonitorMode> parse_monitor_mode(std::string_view text) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower == "off" || lower == "0" || lower.empty()) return MonitorMode::off;
  if (lower == "warn") return MonitorMode::warn;
  if (lower == "error") return MonitorMode::error;
  return std::nullopt;
}

std::string_view to_string(JitEventKind kind) {
  return kind == JitEventKind::compile ? "compile" : "module load";
}

Monitor& Monitor::instance() {
  static Monitor monitor;
  return monitor;
}

Monitor::Monitor() {
  if (const char* mode = std::getenv("ZEROJIT_MONITOR")) {
    if (auto parsed = parse_monitor_mode(mode)) {
      mode_.store(*parsed);
    } else {
      std::fprintf(stderr, "zerojit: ignoring ZEROJIT_MONITOR=%s (expected off, warn or error)\n",
                   mode);
    }
  }
  if (const char* verbose = std::getenv("ZEROJIT_MONITOR_VERBOSE")) {
    verbose_.store(std::string_view(verbose) == "1");
  }
}

void Monitor::on_jit(const JitEvent& event) {
  if (!armed()) return;
  const MonitorMode current = mode();
  if (current == MonitorMode::off) return;
  std::string message = "runtime JIT after warmup: " + std::string(to_string(event.kind)) +
                        " of kernel " + event.kernel + " [" + event.key + "]";
  if (!event.descriptors.empty()) message += "\n  runtime descriptors: " + event.descriptors;
  std::function<void(std::string_view)> sink;
  bool report = false;
  {
    std::lock_guard lock(mutex_);
    events_.push_back(event);
    report = reported_.emplace(event.kernel, event.key).second || verbose();
    sink = sink_;
  }
  if (current == MonitorMode::error) {
    // A load without a compile means the key was warmed, but not on the launch's device.
    throw RuntimeJitError(
        event.kernel, event.key, event.descriptors,
        event.kind == JitEventKind::load
            ? "load after warmup (monitor in error mode): the key was compiled but never loaded "
              "on this launch's device; warm up every device the runtime launches on"
            : "compile after warmup (monitor in error mode): the warmup space of this kernel "
              "does not cover this runtime call");
  }
  if (!report) return;
  message +=
      "\n  (add the point to the kernel's warmup space; warnings repeat only with "
      "ZEROJIT_MONITOR_VERBOSE=1)";
  if (sink) {
    sink(message);
  } else {
    std::fprintf(stderr, "zerojit warning: %s\n", message.c_str());
  }
}

void Monitor::set_sink(std::function<void(std::string_view)> sink) {
  std::lock_guard lock(mutex_);
  sink_ = std::move(sink);
}

std::vector<JitEvent> Monitor::events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

void Monitor::reset_events() {
  std::lock_guard lock(mutex_);
  events_.clear();
  reported_.clear();
}

std::vector<KernelCounters> Monitor::counters() const {
  std::vector<KernelCounters> all;
  for (const KernelBase* kernel : Runtime::instance().kernels()) all.push_back(kernel->counters());
  return all;
}

std::string Monitor::counters_json() const {
  std::string out = "{\"mode\":\"" + std::string(to_string(mode())) +
                    "\",\"armed\":" + (armed() ? "true" : "false") + ",\"kernels\":[";
  bool first = true;
  for (const KernelCounters& c : counters()) {
    if (!first) out += ',';
    first = false;
    out += "{\"kernel\":";
    detail::append_json_string(out, c.kernel);
    out += ",\"hits\":" + std::to_string(c.hits) + ",\"misses\":" + std::to_string(c.misses) +
           ",\"compiles\":" + std::to_string(c.compiles) + ",\"compile_seconds\":";
    detail::append_double(out, c.compile_seconds);
    out += ",\"disk_loads\":" + std::to_string(c.disk_loads) +
           ",\"loads\":" + std::to_string(c.loads) +
           ",\"runtime_jit\":" + std::to_string(c.runtime_jit) + "}";
  }
  out += "]}";
  return out;
}

Monitor::WarmupScope::WarmupScope() : was_armed_(Monitor::instance().armed()) {
  Monitor::instance().disarm();
}

Monitor::WarmupScope::~WarmupScope() {
  if (was_armed_) Monitor::instance().arm();
}

}  // namespace zerojit

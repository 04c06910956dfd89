#include "zerojit/monitor.hpp"

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "environment.hpp"
#include "json_text.hpp"
#include "zerojit/background.hpp"
#include "zerojit/error.hpp"
#include "zerojit/log.hpp"

namespace zerojit {

std::string_view to_string(MonitorMode mode) {
  switch (mode) {
    case MonitorMode::off:
      return "off";
    case MonitorMode::warn:
      return "warn";
    case MonitorMode::error:
      return "error";
    case MonitorMode::fallback:
      return "fallback";
  }
  return "?";
}

std::optional<MonitorMode> parse_monitor_mode(std::string_view text) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower == "off" || lower == "0" || lower.empty()) return MonitorMode::off;
  if (lower == "warn") return MonitorMode::warn;
  if (lower == "error") return MonitorMode::error;
  if (lower == "fallback") return MonitorMode::fallback;
  return std::nullopt;
}

std::string_view to_string(JitEventKind kind) {
  switch (kind) {
    case JitEventKind::compile:
      return "compile";
    case JitEventKind::load:
      return "module load";
    case JitEventKind::specialization:
      return "specialization";
  }
  return "?";
}

namespace {

// A kernel zerojit does not own has no warmup space: what its owner can do instead.
std::string foreign_advice() {
  return "this kernel is not zerojit's, so no warmup covers it; compile it before warmup ends "
         "(call it once, or its library's own warmup), or put it on zerojit "
         "(zerojit.TritonKernel, zerojit.CuteKernel), whose warmup compiles every key; the guard "
         "is off with ZEROJIT_TRITON_GUARD=0 / ZEROJIT_CUTE_GUARD=0";
}

std::string refusal_reason(const JitEvent& event) {
  switch (event.kind) {
    case JitEventKind::load:
      // A load without a compile means the key was warmed, but not on the launch's device.
      return "load after warmup (monitor in error mode): the key was compiled but never loaded "
             "on this launch's device; warm up every device the runtime launches on";
    case JitEventKind::specialization:
      return "the call needs another specialization than its key compiles (monitor in error "
             "mode): " +
             event.detail + "; dispatch must return a key whose program covers this call";
    case JitEventKind::compile:
      break;
  }
  if (event.foreign) return "compile after warmup (monitor in error mode): " + foreign_advice();
  return "compile after warmup (monitor in error mode): the warmup space of this kernel does "
         "not cover this runtime call" +
         (event.detail.empty() ? std::string() : " (" + event.detail + ")");
}

}  // namespace

Monitor& Monitor::instance() {
  static Monitor monitor;
  return monitor;
}

Monitor::Monitor() {
  if (const char* mode = detail::environment_text("ZEROJIT_MONITOR")) {
    if (auto parsed = parse_monitor_mode(mode)) {
      mode_.store(*parsed);
    } else {
      log_warning("monitor", "ignoring ZEROJIT_MONITOR=" + std::string(mode) +
                                 " (expected off, warn, error or fallback)");
    }
  }
  verbose_.store(detail::environment_flag("ZEROJIT_MONITOR_VERBOSE"));
}

void Monitor::on_jit(const JitEvent& event) {
  if (!armed()) return;
  const MonitorMode current = mode();
  if (current == MonitorMode::off) return;
  std::string message = "runtime JIT after warmup: " + std::string(to_string(event.kind)) +
                        " of kernel " + event.kernel + " [" + event.key + "]";
  if (!event.detail.empty()) message += ": " + event.detail;
  if (!event.descriptors.empty()) message += "\n  runtime descriptors: " + event.descriptors;
  std::function<void(std::string_view)> sink;
  std::function<void(const JitEvent&)> callback;
  bool report = false;
  {
    std::lock_guard lock(mutex_);
    events_.push_back(event);
    report = reported_.emplace(event.kernel, event.key).second || verbose();
    sink = sink_;
    callback = event_callback_;
  }
  if (callback) callback(event);
  if (current == MonitorMode::error) {
    // A load without a compile means the key was warmed, but not on the launch's device.
    throw RuntimeJitError(event.kernel, event.key, event.descriptors, refusal_reason(event));
  }
  if (!report) return;
  message += "\n  (" +
             (event.foreign ? foreign_advice() : "add the point to the kernel's warmup space") +
             "; warnings repeat only with ZEROJIT_MONITOR_VERBOSE=1)";
  if (sink) {
    sink(message);
  } else {
    log_warning("monitor", message);
  }
}

void Monitor::on_foreign_jit(const JitEvent& event, const std::string& counter) {
  KernelStats* stats = nullptr;
  {
    std::lock_guard lock(mutex_);
    for (const auto& foreign : foreign_) {
      if (foreign->name == counter) stats = &foreign->stats;
    }
    if (stats == nullptr) {
      foreign_.push_back(std::make_unique<ForeignCounter>());
      foreign_.back()->name = counter;
      stats = &foreign_.back()->stats;
      tracked_.emplace_back(&foreign_.back()->name, stats);
    }
  }
  (event.kind == JitEventKind::load ? stats->loads : stats->compiles)
      .fetch_add(1, std::memory_order_relaxed);
  if (armed()) stats->runtime_jit.fetch_add(1, std::memory_order_relaxed);
  JitEvent foreign = event;
  foreign.foreign = true;
  on_jit(foreign);
}

void Monitor::set_sink(std::function<void(std::string_view)> sink) {
  std::lock_guard lock(mutex_);
  sink_ = std::move(sink);
}

void Monitor::set_event_callback(std::function<void(const JitEvent&)> callback) {
  std::lock_guard lock(mutex_);
  event_callback_ = std::move(callback);
}

void Monitor::track(const std::string* kernel, const KernelStats* stats) {
  std::lock_guard lock(mutex_);
  tracked_.emplace_back(kernel, stats);
}

void Monitor::untrack(const KernelStats* stats) {
  std::lock_guard lock(mutex_);
  std::erase_if(tracked_, [stats](const auto& entry) { return entry.second == stats; });
}

KernelCounters KernelStats::read(std::string_view kernel) const {
  KernelCounters c;
  c.kernel = std::string(kernel);
  c.hits = hits.load(std::memory_order_relaxed);
  c.misses = misses.load(std::memory_order_relaxed);
  c.compiles = compiles.load(std::memory_order_relaxed);
  c.compile_seconds =
      static_cast<double>(compile_nanoseconds.load(std::memory_order_relaxed)) * 1e-9;
  c.disk_loads = disk_loads.load(std::memory_order_relaxed);
  c.loads = loads.load(std::memory_order_relaxed);
  c.runtime_jit = runtime_jit.load(std::memory_order_relaxed);
  c.fallback_launches = fallback_launches.load(std::memory_order_relaxed);
  c.background_compiles = background_compiles.load(std::memory_order_relaxed);
  c.background_failures = background_failures.load(std::memory_order_relaxed);
  return c;
}

void KernelStats::reset() {
  for (auto* counter :
       {&hits, &misses, &compiles, &compile_nanoseconds, &disk_loads, &loads, &runtime_jit,
        &fallback_launches, &background_compiles, &background_failures}) {
    counter->store(0, std::memory_order_relaxed);
  }
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
  std::lock_guard lock(mutex_);
  std::vector<KernelCounters> all;
  all.reserve(tracked_.size());
  for (const auto& [kernel, stats] : tracked_) all.push_back(stats->read(*kernel));
  return all;
}

std::string Monitor::counters_json() const {
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const KernelCounters& c : counters()) {
    kernels.push_back({{"kernel", c.kernel},
                       {"hits", c.hits},
                       {"misses", c.misses},
                       {"compiles", c.compiles},
                       {"compile_seconds", c.compile_seconds},
                       {"disk_loads", c.disk_loads},
                       {"loads", c.loads},
                       {"runtime_jit", c.runtime_jit},
                       {"fallback_launches", c.fallback_launches},
                       {"background_compiles", c.background_compiles},
                       {"background_failures", c.background_failures}});
  }
  return json_text(
      {{"mode", to_string(mode())}, {"armed", armed()}, {"kernels", std::move(kernels)}});
}

Monitor::WarmupScope::WarmupScope() : was_armed_(Monitor::instance().armed()) {
  Monitor::instance().disarm();
}

Monitor::WarmupScope::~WarmupScope() {
  if (was_armed_) Monitor::instance().arm();
}

void Monitor::set_mode(MonitorMode mode) {
  mode_.store(mode, std::memory_order_release);
  if (mode == MonitorMode::fallback) BackgroundCompiles::instance().start();
}

void Monitor::arm() {
  // A mode read from $ZEROJIT_MONITOR never passed through set_mode: start the thread here, off
  // the serving path, before the first miss a fallback serves.
  if (mode() == MonitorMode::fallback) BackgroundCompiles::instance().start();
  armed_.store(true, std::memory_order_release);
}

}  // namespace zerojit

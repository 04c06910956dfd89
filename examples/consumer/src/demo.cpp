// The consumer's program: warms its kernel compile-only for sm_90a (no GPU needed, NVRTC is),
// through the engine hooks (log handler, progress callback, monitor event callback), then shows
// the monitor refusing a key that warmup did not compile. Exit 0 when all of that happened.
#include <cstdio>
#include <string>

#include "axpy.hpp"

int main() {
  using namespace zerojit;
  // Every message of the library arrives here instead of on standard error.
  int messages = 0;
  set_log_handler([&messages](const LogRecord& record) {
    ++messages;
    std::printf("[log %s %.*s] %.*s\n", std::string(to_string(record.level)).c_str(),
                static_cast<int>(record.component.size()), record.component.data(),
                static_cast<int>(record.message.size()), record.message.data());
  });

  consumer::AxpyConfig config;  // f32, f64 and bf16, length 1024: three keys
  WarmupRegistry registry;
  consumer::register_warmup(registry, config);

  WarmupOptions options;
  options.arch = "sm_90a";
  options.compile_only = true;
  options.progress = ProgressStyle::none;
  options.on_progress = [](const WarmupProgress& progress) {
    std::printf("progress %zu/%zu %s [%s] %s\n", progress.done, progress.total,
                progress.key->kernel.c_str(), progress.key->key.c_str(),
                progress.key->error.empty() ? "ok" : "FAILED");
  };
  Monitor::instance().set_mode(MonitorMode::error);
  int events = 0;
  Monitor::instance().set_event_callback([&events](const JitEvent&) { ++events; });

  const WarmupReport report = registry.warmup(options);
  std::printf("%s\n", report.summary_line().c_str());
  if (!report.ok()) return 1;

  auto& kernel = consumer::AxpyKernel::instance();
  // A warmed key is served from memory: no compile, no monitor event.
  kernel.compile(consumer::AxpyKey{DType::f32, 4}, "sm_90a");
  try {
    // Length 1023 dispatches to unroll 1, which the warmup space never reached.
    kernel.compile(consumer::AxpyKey{DType::f32, 1}, "sm_90a");
    std::printf("the monitor let an unwarmed key compile\n");
    return 1;
  } catch (const RuntimeJitError& error) {
    std::printf("monitor refused %s [%s] (%d event)\n", error.kernel().c_str(), error.key().c_str(),
                events);
  }
  return events == 1 ? 0 : 1;
}

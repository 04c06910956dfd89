// Progress of a warmup (internal to src/registry.cpp): a redrawn bar on a terminal's standard
// error (keys done, rate, elapsed time and an estimate of the time left), otherwise one line per
// key through the log (log.hpp: component "warmup", level info); and the caller's callback.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

#include "zerojit/registry.hpp"

namespace zerojit {

class Progress {
 public:
  // `automatic` draws the bar when standard error is a terminal, lines otherwise.
  Progress(ProgressStyle style, std::size_t total,
           std::function<void(const WarmupProgress&)> callback = {});
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // One key is done (compiled, loaded from disk or memory, or failed). Thread-safe.
  void finished(const KeyReport& key);

 private:
  void draw_bar(const std::string& label);

  ProgressStyle style_;
  std::size_t total_;
  std::size_t done_ = 0;
  std::chrono::steady_clock::time_point start_;
  // The first line of the last failure printed, so that N keys failing for one reason (no
  // NVRTC, say) print it once and then only "the same error".
  std::string last_error_;
  std::function<void(const WarmupProgress&)> callback_;
  std::mutex mutex_;
};

// "0:07", "12:34", "1:02:03".
std::string clock_text(double seconds);

}  // namespace zerojit

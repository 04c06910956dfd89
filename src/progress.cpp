#include "progress.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "zerojit/log.hpp"

namespace zerojit {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

double seconds_between(std::chrono::steady_clock::time_point start,
                       std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

}  // namespace

std::string clock_text(double seconds) {
  if (!(seconds >= 0.0) || seconds > 359999.0) seconds = seconds > 0.0 ? 359999.0 : 0.0;
  const auto whole = static_cast<long long>(std::llround(seconds));
  char buffer[32];
  if (whole >= 3600) {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", whole / 3600, whole / 60 % 60,
                  whole % 60);
  } else {
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld", whole / 60, whole % 60);
  }
  return buffer;
}

Progress::Progress(ProgressStyle style, std::size_t total,
                   std::function<void(const WarmupProgress&)> callback)
    : total_(total), start_(std::chrono::steady_clock::now()), callback_(std::move(callback)) {
  if (style == ProgressStyle::automatic) {
    style = isatty(STDERR_FILENO) ? ProgressStyle::bar : ProgressStyle::lines;
  }
  style_ = total == 0 ? ProgressStyle::none : style;
  if (style_ == ProgressStyle::bar) {
    // Drawn at once, so that a slow first key does not leave the terminal silent.
    std::lock_guard lock(mutex_);
    draw_bar("");
  }
}

void Progress::finished(const KeyReport& key) {
  std::lock_guard lock(mutex_);
  ++done_;
  if (style_ == ProgressStyle::lines) {
    std::string error;
    if (!key.error.empty()) {
      error = first_line(key.error);
      if (error == last_error_) {
        error = "the same error as above";
      } else {
        last_error_ = error;
      }
    }
    char head[64];
    std::snprintf(head, sizeof head, "[%zu/%zu] %-9s %6.3f s  ", done_, total_,
                  key.error.empty() ? std::string(to_string(key.origin)).c_str() : "FAILED",
                  key.seconds);
    log_info("warmup",
             head + key.kernel + " [" + key.key + "]" + (error.empty() ? "" : ": ") + error);
  } else if (style_ == ProgressStyle::bar) {
    draw_bar(key.kernel);
    if (done_ == total_) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  if (callback_) callback_(WarmupProgress{done_, total_, &key});
}

// warmup [=========>          ] 3/8  1.4 keys/s  0:02 elapsed, about 0:04 left  dsv4.c4_store
void Progress::draw_bar(const std::string& label) {
  constexpr std::size_t kWidth = 30;
  const std::size_t filled = done_ * kWidth / total_;
  std::string bar(filled, '=');
  if (filled < kWidth) bar += '>' + std::string(kWidth - filled - 1, ' ');
  const double elapsed = seconds_between(start_, std::chrono::steady_clock::now());
  // The estimate assumes the keys left take as long as the keys done on average; keys run
  // longest first, so it errs long, and it shrinks as the short keys finish.
  std::string rate = "- keys/s";
  std::string left = "time left unknown";
  if (done_ > 0 && elapsed > 0.0) {
    const double per_second = static_cast<double>(done_) / elapsed;
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, per_second < 10.0 ? "%.2f keys/s" : "%.1f keys/s",
                  per_second);
    rate = buffer;
    left = "about " + clock_text(static_cast<double>(total_ - done_) / per_second) + " left";
  }
  std::string name = label;
  if (name.size() > 40) name = name.substr(0, 37) + "...";
  std::fprintf(stderr, "\r\033[Kwarmup [%s] %zu/%zu  %s  %s elapsed, %s  %s", bar.c_str(), done_,
               total_, rate.c_str(), clock_text(elapsed).c_str(), left.c_str(), name.c_str());
}

}  // namespace zerojit

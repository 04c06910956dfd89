// The Prometheus exposition of the counters (zerojit/metrics.hpp): values, and text a scraper
// accepts (HELP and TYPE before each family's samples, escaped label values).
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "zerojit/metrics.hpp"
#include "zerojit/monitor.hpp"

namespace zerojit {
namespace {

// The sample line of `name` with `labels` ("" for none), or "" when there is none.
std::string sample_line(const std::string& text, const std::string& name,
                        const std::string& labels) {
  std::istringstream lines(text);
  const std::string head = name + labels + " ";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(head, 0) == 0) return line;
  }
  return "";
}

// Every line is a comment of the two kinds or a sample of the family the last TYPE named,
// each family is declared once, and label values escape what they must.
void expect_valid_exposition(const std::string& text) {
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const std::regex help(R"(# HELP (zerojit_[a-z_]+) [^\n]+)");
  const std::regex type(R"(# TYPE (zerojit_[a-z_]+) (counter|gauge))");
  const std::regex sample(
      R"((zerojit_[a-z_]+)(\{[a-z_]+="([^"\\\n]|\\["\\n])*"(,[a-z_]+="([^"\\\n]|\\["\\n])*")*\})? )"
      R"(([0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?|NaN|[-+]Inf))");
  std::istringstream lines(text);
  std::set<std::string> declared;
  std::string helped, current;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      helped = m[1];
      EXPECT_TRUE(declared.insert(helped).second) << "declared twice: " << line;
    } else if (std::regex_match(line, m, type)) {
      EXPECT_EQ(m[1], helped) << "TYPE without its HELP: " << line;
      current = m[1];
      if (m[2] == "counter") {
        EXPECT_TRUE(current.ends_with("_total")) << line;
      }
    } else if (std::regex_match(line, m, sample)) {
      EXPECT_EQ(m[1], current) << "a sample outside its family: " << line;
    } else {
      ADD_FAILURE() << "not exposition format: " << line;
    }
  }
}

TEST(Metrics, EveryCounterOfAKernelIsRenderedWithItsValue) {
  MetricsSnapshot snapshot;
  KernelCounters c;
  c.kernel = "examples.saxpy";
  c.hits = 7;
  c.misses = 2;
  c.compiles = 1;
  c.compile_seconds = 0.25;
  c.disk_loads = 1;
  c.loads = 2;
  c.runtime_jit = 1;
  c.fallback_launches = 3;
  c.background_compiles = 4;
  c.background_failures = 5;
  snapshot.kernels.push_back(c);
  snapshot.mode = MonitorMode::fallback;
  snapshot.armed = true;
  const std::string text = prometheus_text(metric_families(snapshot));
  expect_valid_exposition(text);
  const std::string k = "{kernel=\"examples.saxpy\"}";
  EXPECT_EQ(sample_line(text, "zerojit_kernel_hits_total", k),
            "zerojit_kernel_hits_total" + k + " 7");
  EXPECT_NE(sample_line(text, "zerojit_kernel_misses_total", k).find(" 2"), std::string::npos);
  EXPECT_NE(sample_line(text, "zerojit_kernel_compiles_total", k).find(" 1"), std::string::npos);
  EXPECT_NE(sample_line(text, "zerojit_kernel_compile_seconds_total", k).find(" 0.25"),
            std::string::npos);
  EXPECT_NE(sample_line(text, "zerojit_kernel_disk_loads_total", k).find(" 1"), std::string::npos);
  EXPECT_NE(sample_line(text, "zerojit_kernel_module_loads_total", k).find(" 2"),
            std::string::npos);
  EXPECT_NE(sample_line(text, "zerojit_kernel_runtime_jit_total", k).find(" 1"), std::string::npos);
  EXPECT_NE(sample_line(text, "zerojit_kernel_fallback_launches_total", k).find(" 3"),
            std::string::npos);
  EXPECT_NE(sample_line(text, "zerojit_kernel_background_compiles_total", k).find(" 4"),
            std::string::npos);
  EXPECT_NE(sample_line(text, "zerojit_kernel_background_failures_total", k).find(" 5"),
            std::string::npos);
  EXPECT_EQ(sample_line(text, "zerojit_monitor_armed", ""), "zerojit_monitor_armed 1");
  EXPECT_EQ(sample_line(text, "zerojit_monitor_mode", "{mode=\"fallback\"}"),
            "zerojit_monitor_mode{mode=\"fallback\"} 1");
  EXPECT_EQ(sample_line(text, "zerojit_monitor_mode", "{mode=\"error\"}"),
            "zerojit_monitor_mode{mode=\"error\"} 0");
  EXPECT_NE(text.find("# TYPE zerojit_kernel_hits_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE zerojit_monitor_armed gauge\n"), std::string::npos);
  // No cache tier installed in the snapshot: no cache families.
  EXPECT_EQ(text.find("zerojit_disk_cache_"), std::string::npos);
  EXPECT_EQ(text.find("zerojit_remote_cache_"), std::string::npos);
}

TEST(Metrics, CacheTiersAreRenderedWhenInstalled) {
  MetricsSnapshot snapshot;
  snapshot.disk = DiskCacheCounters{};
  snapshot.disk->hits = 3;
  snapshot.disk->published = 4;
  snapshot.disk->not_saved = 1;
  snapshot.remote = RemoteCacheCounters{};
  snapshot.remote->errors = 6;
  snapshot.remote->host_code_refused = 2;
  const std::string text = prometheus_text(metric_families(snapshot));
  expect_valid_exposition(text);
  EXPECT_EQ(sample_line(text, "zerojit_disk_cache_hits_total", ""),
            "zerojit_disk_cache_hits_total 3");
  EXPECT_EQ(sample_line(text, "zerojit_disk_cache_published_total", ""),
            "zerojit_disk_cache_published_total 4");
  EXPECT_EQ(sample_line(text, "zerojit_disk_cache_not_saved_total", ""),
            "zerojit_disk_cache_not_saved_total 1");
  EXPECT_EQ(sample_line(text, "zerojit_disk_cache_misses_total", ""),
            "zerojit_disk_cache_misses_total 0");
  EXPECT_EQ(sample_line(text, "zerojit_remote_cache_errors_total", ""),
            "zerojit_remote_cache_errors_total 6");
  EXPECT_EQ(sample_line(text, "zerojit_remote_cache_host_code_refused_total", ""),
            "zerojit_remote_cache_host_code_refused_total 2");
}

// A kernel name is the one free text in a label: quotes, backslashes and newlines are escaped,
// and two kernels of one name are one sample (Prometheus refuses duplicates).
TEST(Metrics, LabelValuesAreEscapedAndKernelsOfOneNameSummed) {
  MetricsSnapshot snapshot;
  KernelCounters odd;
  odd.kernel = "we\"ird\\name\nx";
  odd.hits = 1;
  snapshot.kernels = {odd, odd};
  const std::string text = prometheus_text(metric_families(snapshot));
  expect_valid_exposition(text);
  EXPECT_EQ(sample_line(text, "zerojit_kernel_hits_total", R"({kernel="we\"ird\\name\nx"})"),
            R"(zerojit_kernel_hits_total{kernel="we\"ird\\name\nx"} 2)");
}

// The live exposition reads the monitor: a tracked kernel's counters, as they are bumped.
TEST(Metrics, TheLiveTextFollowsTheMonitorsCounters) {
  static const std::string name = "metrics_test.kernel";
  KernelStats stats;
  Monitor::instance().track(&name, &stats);
  stats.hits.fetch_add(5);
  stats.fallback_launches.fetch_add(2);
  stats.background_compiles.fetch_add(1);
  stats.background_failures.fetch_add(1);
  const std::string text = prometheus_text();
  Monitor::instance().untrack(&stats);
  expect_valid_exposition(text);
  const std::string k = "{kernel=\"metrics_test.kernel\"}";
  EXPECT_EQ(sample_line(text, "zerojit_kernel_hits_total", k),
            "zerojit_kernel_hits_total" + k + " 5");
  EXPECT_EQ(sample_line(text, "zerojit_kernel_fallback_launches_total", k),
            "zerojit_kernel_fallback_launches_total" + k + " 2");
  EXPECT_EQ(sample_line(text, "zerojit_kernel_background_failures_total", k),
            "zerojit_kernel_background_failures_total" + k + " 1");
  EXPECT_EQ(prometheus_text().find("metrics_test.kernel"), std::string::npos) << "untracked";
}

}  // namespace
}  // namespace zerojit

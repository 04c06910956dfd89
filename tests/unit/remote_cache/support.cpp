#include "unit/remote_cache/support.hpp"

#include "zerojit/compiler.hpp"

namespace zerojit::test {

int HostRun::total(const char* name) const {
  if (!doc.is_object() || !doc.contains("result")) return -1;
  return doc["result"]["totals"].value(name, -1);
}

int HostRun::remote(const char* name) const {
  if (!doc.is_object() || !doc.contains("result") || !doc["result"].contains("remote_cache")) {
    return -1;
  }
  return doc["result"]["remote_cache"].value(name, -1);
}

void RemoteCacheTest::SetUp() {
  for (const char* name : {"ZEROJIT_REMOTE_CACHE", "ZEROJIT_REMOTE_CACHE_PASSWORD",
                           "ZEROJIT_REMOTE_CACHE_PREFIX", "ZEROJIT_CACHE_ALLOW_SHARED"}) {
    ::unsetenv(name);
  }
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC is not available: " << nvrtc_unavailable_reason();
  server = std::make_unique<RedisServer>(scratch / "redis");
  if (!server->ok())
    GTEST_SKIP() << "no Redis server for the remote-cache tests: " << server->why();
}

std::vector<std::string> RemoteCacheTest::host_args(const std::string& disk, const std::string& url,
                                                    std::vector<std::string> extra) const {
  std::vector<std::string> args = {"warmup", "--examples",  "--compile-only",
                                   "--json", "--cache-dir", (scratch / disk).string()};
  if (!url.empty()) {
    args.emplace_back("--remote-cache");
    args.push_back(url);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::unique_ptr<Worker> RemoteCacheTest::start_host(const std::string& disk,
                                                    std::vector<std::string> extra,
                                                    const std::vector<std::string>& environment,
                                                    std::string url) {
  if (url.empty()) url = server->url();
  if (url == "none") url.clear();
  return std::make_unique<Worker>(ZEROJIT_TOOL, host_args(disk, url, std::move(extra)),
                                  scratch.path(), environment);
}

HostRun RemoteCacheTest::host(const std::string& disk, std::vector<std::string> extra,
                              const std::vector<std::string>& environment, std::string url) {
  return finish(start_host(disk, std::move(extra), environment, std::move(url))->wait());
}

HostRun RemoteCacheTest::finish(WorkerRun run) {
  HostRun out;
  out.run = std::move(run);
  out.doc = json::parse(out.run.stdout_text, nullptr, false);
  if (out.doc.is_discarded()) out.doc = nullptr;
  return out;
}

}  // namespace zerojit::test

// What the remote-cache tests share: a real redis-server per test, and "hosts": processes of
// the zerojit tool warming the example kernels (compile only, real NVRTC compiles) against a
// disk cache of their own and the remote.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "unit/disk_cache/support.hpp"
#include "unit/remote_cache/redis_server.hpp"

namespace zerojit::test {

// The tool's --json document of one host's run.
struct HostRun {
  WorkerRun run;
  json doc;  // null when it printed none

  bool ok() const { return run.exit_code == 0 && doc.is_object() && doc.value("ok", false); }
  int total(const char* name) const;   // result.totals.<name>
  int remote(const char* name) const;  // result.remote_cache.<name>
  std::string describe() const { return run.describe(); }
};

class RemoteCacheTest : public ::testing::Test {
 protected:
  void SetUp() override;

  // A host warming the examples with its own disk cache `disk` (under scratch) and `url`
  // (default: the server's).
  std::vector<std::string> host_args(const std::string& disk, const std::string& url,
                                     std::vector<std::string> extra = {}) const;
  std::unique_ptr<Worker> start_host(const std::string& disk, std::vector<std::string> extra = {},
                                     const std::vector<std::string>& environment = {},
                                     std::string url = {});
  HostRun host(const std::string& disk, std::vector<std::string> extra = {},
               const std::vector<std::string>& environment = {}, std::string url = {});
  static HostRun finish(WorkerRun run);

  std::vector<std::string> entry_keys() { return server->keys("zerojit:entry:*"); }
  std::vector<std::string> lock_keys() { return server->keys("zerojit:lock:*"); }

  TempDir scratch;
  std::unique_ptr<RedisServer> server;
};

}  // namespace zerojit::test

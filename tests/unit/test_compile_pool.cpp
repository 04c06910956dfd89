// Compiles in worker processes (compile_pool.hpp): the same bytes as in-process NVRTC, errors
// carried back whole, a dead worker costing nothing but its own use, and a warmup that compiles
// through the pool. NVRTC for real; no GPU.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <chrono>
#include <memory>
#include <set>
#include <thread>

#include "support/core_fixture.hpp"
#include "zerojit/compile_pool.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit {
namespace {

constexpr EmbeddedFile kPoolFiles[] = {
    {"pool/ok.cu",
     "#include \"pool/inc.cuh\"\n"
     "template <int N> __global__ void fill(int* p) { p[threadIdx.x] = N + kBase; }\n"},
    {"pool/inc.cuh", "#pragma once\nconstexpr int kBase = 7;\n"},
    {"pool/bad.cu", "__global__ void bad(int* p) { *p = not_declared_here; }\n"},
};
const EmbeddedFileSet kPoolSet{kPoolFiles};

Program fill_program(int n) {
  Program program;
  program.kernel_name = "test.pool_fill";
  program.files = &kPoolSet;
  program.source_path = "pool/ok.cu";
  program.name_expressions = {"fill<" + std::to_string(n) + ">"};
  program.key_text = "n=" + std::to_string(n);
  return program;
}

// The pids of this process's children that are still running.
std::set<pid_t> live_children() {
  std::set<pid_t> children;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return children;
  while (dirent* entry = readdir(dir)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    FILE* stat = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
    if (stat == nullptr) continue;
    int ignored_pid = 0, parent = 0;
    char state = 0;
    char name[256];
    if (std::fscanf(stat, "%d (%255[^)]) %c %d", &ignored_pid, name, &state, &parent) == 4 &&
        parent == getpid() && state != 'Z') {
      children.insert(pid);
    }
    std::fclose(stat);
  }
  closedir(dir);
  return children;
}

class CompilePool : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(nvrtc_available()) << nvrtc_unavailable_reason(); }
};

TEST_F(CompilePool, GivesTheSameCubinAndNamesAsInProcess) {
  const NvrtcInput input = make_nvrtc_input(fill_program(3), "sm_90a");
  const NvrtcOutput here = run_nvrtc(input);
  CompileProcessPool pool(2);
  EXPECT_EQ(pool.workers(), 0) << "no fork before the first compile";
  const NvrtcOutput there = pool.run(input);
  EXPECT_EQ(pool.workers(), 2);
  EXPECT_EQ(pool.fallbacks(), 0);
  EXPECT_EQ(there.cubin, here.cubin);
  ASSERT_EQ(there.lowered_names.size(), 1u);
  EXPECT_EQ(there.lowered_names[0].expression, "fill<3>");
  EXPECT_EQ(there.lowered_names[0].lowered, here.lowered_names[0].lowered);
  EXPECT_EQ(there.nvrtc_version, here.nvrtc_version);
  EXPECT_GT(there.compile_seconds, 0.0);
}

TEST_F(CompilePool, CarriesACompileErrorBackWithItsLog) {
  Program bad;
  bad.kernel_name = "test.pool_bad";
  bad.files = &kPoolSet;
  bad.source_path = "pool/bad.cu";
  bad.key_text = "variant=bad";
  CompileProcessPool pool(1);
  try {
    pool.run(make_nvrtc_input(bad, "sm_90a"));
    FAIL() << "expected CompileError";
  } catch (const CompileError& error) {
    EXPECT_EQ(error.kernel(), "test.pool_bad");
    EXPECT_EQ(error.key(), "variant=bad");
    EXPECT_NE(error.log().find("not_declared_here"), std::string::npos) << error.log();
    EXPECT_NE(std::string(error.what()).find("test.pool_bad [variant=bad]"), std::string::npos);
  }
  // The worker survives a failed compile and serves the next request.
  EXPECT_FALSE(pool.run(make_nvrtc_input(fill_program(1), "sm_90a")).cubin.empty());
  EXPECT_EQ(pool.fallbacks(), 0);
}

TEST_F(CompilePool, ADeadWorkerFallsBackToThisProcessAndIsNotUsedAgain) {
  const NvrtcInput input = make_nvrtc_input(fill_program(5), "sm_90a");
  const std::string expected = run_nvrtc(input).cubin;
  const std::set<pid_t> before = live_children();
  CompileProcessPool pool(1);
  ASSERT_EQ(pool.run(input).cubin, expected);
  std::set<pid_t> workers;
  for (pid_t pid : live_children()) {
    if (!before.count(pid)) workers.insert(pid);
  }
  ASSERT_EQ(workers.size(), 1u);
  ASSERT_EQ(kill(*workers.begin(), SIGKILL), 0);
  // Not reaped by anyone but the pool: wait until it is gone from the live list.
  for (int i = 0; i < 200 && live_children().count(*workers.begin()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(pool.run(input).cubin, expected);  // compiled here instead
  EXPECT_EQ(pool.fallbacks(), 1);
  EXPECT_EQ(pool.run(input).cubin, expected);  // no worker left: here again
  EXPECT_EQ(pool.fallbacks(), 2);
}

// A worker that stops answering (here stopped by SIGSTOP: no CPU time while our request is
// outstanding) is killed after the pool's bound and the compile runs here: a warmup never
// waits on a worker without a bound.
TEST_F(CompilePool, AStalledWorkerIsKilledAfterTheBoundAndTheCompileRunsHere) {
  const NvrtcInput input = make_nvrtc_input(fill_program(6), "sm_90a");
  const std::string expected = run_nvrtc(input).cubin;
  const std::set<pid_t> before = live_children();
  CompileProcessPool pool(1, std::chrono::milliseconds(300));
  ASSERT_EQ(pool.run(input).cubin, expected);
  std::set<pid_t> workers;
  for (pid_t pid : live_children()) {
    if (!before.count(pid)) workers.insert(pid);
  }
  ASSERT_EQ(workers.size(), 1u);
  const pid_t worker = *workers.begin();
  ASSERT_EQ(kill(worker, SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(pool.run(input).cubin, expected);  // compiled here once the worker was given up
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.3) << "given up before the bound";
  EXPECT_LT(waited, 30.0) << "the bound did not hold";
  EXPECT_EQ(pool.fallbacks(), 1);
  // Killed (a zombie until the pool reaps it), not left stopped.
  for (int i = 0; i < 400 && live_children().count(worker); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(live_children().count(worker), 0u);
  EXPECT_EQ(pool.run(input).cubin, expected);
  EXPECT_EQ(pool.fallbacks(), 2);
}

// A worker must not keep the parent's descriptors: a disk-cache lock file flock()ed while the
// pool forks would otherwise stay locked for every other process after the parent closes it.
TEST_F(CompilePool, WorkersHoldNoneOfTheParentsFiles) {
  char path[] = "/tmp/zerojit-pool-lock-XXXXXX";
  const int created = mkstemp(path);
  ASSERT_GE(created, 0);
  const int held = fcntl(created, F_DUPFD, 100);  // above the worker's own descriptors
  ASSERT_GE(held, 100);
  close(created);
  ASSERT_EQ(flock(held, LOCK_EX), 0);
  CompileProcessPool pool(2);
  ASSERT_FALSE(pool.run(make_nvrtc_input(fill_program(2), "sm_90a")).cubin.empty());
  ASSERT_EQ(pool.workers(), 2);  // forked while `held` was open and locked
  close(held);
  const int again = open(path, O_RDWR);
  ASSERT_GE(again, 0);
  EXPECT_EQ(flock(again, LOCK_EX | LOCK_NB), 0) << "a worker still holds the lock: " << errno;
  close(again);
  unlink(path);
}

TEST_F(CompilePool, InstallationsMayEndInAnyOrder) {
  CompileProcessPool first(1), second(1);
  Runtime& runtime = Runtime::instance();
  EXPECT_EQ(runtime.compile_executor(), nullptr);
  auto a = std::make_unique<Runtime::CompileExecutorInstallation>(first);
  auto b = std::make_unique<Runtime::CompileExecutorInstallation>(second);
  EXPECT_EQ(runtime.compile_executor(), &second);
  a.reset();  // the older one ends first: the newer stays active
  EXPECT_EQ(runtime.compile_executor(), &second);
  b.reset();
  EXPECT_EQ(runtime.compile_executor(), nullptr);  // and nothing comes back
}

TEST_F(CompilePool, WorkersExitWhenThePoolIsDestroyed) {
  const std::set<pid_t> before = live_children();
  {
    CompileProcessPool pool(3);
    std::vector<std::thread> threads;
    for (int n = 0; n < 3; ++n) {
      threads.emplace_back(
          [&pool, n] { pool.run(make_nvrtc_input(fill_program(10 + n), "sm_90a")); });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(pool.workers(), 3);
    EXPECT_EQ(live_children().size(), before.size() + 3);
  }
  EXPECT_EQ(live_children(), before);
}

// A kernel with several keys, warmed with compile_processes: the artifacts come from workers.
struct PoolKey {
  int n = 0;
  static constexpr auto fields() { return std::tuple{field("n", &PoolKey::n)}; }
  auto operator<=>(const PoolKey&) const = default;
};
struct PoolDesc {
  std::int64_t n = 0;
  static constexpr auto fields() { return std::tuple{field("n", &PoolDesc::n)}; }
};
class PoolKernel final : public JitKernel<PoolKernel, PoolKey, PoolDesc> {
 public:
  PoolKernel() : JitKernel("test.pool_fill") {}
  PoolKey dispatch(const PoolDesc& d) const override { return {static_cast<int>(d.n)}; }
  Program program(const PoolKey& key) const override {
    Program p = fill_program(key.n);
    p.key_text = describe(key);
    return p;
  }
};

class CompilePoolWarmup : public testing::CoreTest {};

TEST_F(CompilePoolWarmup, CompilesEveryKeyThroughTheWorkers) {
  static PoolKernel kernel;
  WarmupRegistry registry;
  registry.add(kernel, "all", [] {
    WarmupSpace<PoolDesc> s;
    s.choices("n", std::vector<std::int64_t>{1, 2, 3, 4, 5},
              [](PoolDesc& d, std::int64_t v) { d.n = v; });
    return s;
  });
  const std::set<pid_t> before = live_children();
  const auto report = registry.warmup(WarmupOptions{
      .compile_only = true, .jobs = 3, .progress = ProgressStyle::none, .compile_processes = true});
  EXPECT_EQ(report.compiled(), 5);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.compile_workers, 3);
  EXPECT_EQ(report.compile_fallbacks, 0);
  EXPECT_EQ(live_children(), before);  // the pool's workers are gone with the warmup
  for (const KeyReport& key : report.keys) EXPECT_GT(key.compile_seconds, 0.0) << key.key;
}

}  // namespace
}  // namespace zerojit

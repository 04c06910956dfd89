// Serving through a miss (the monitor's fallback mode): a call whose key was not warmed launches
// its kernel's warmed fallback at once and the key compiles in the background; the compile's
// thread, its order against the call and its outcome are seen through a compiler that holds
// each compile until the test lets it go.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "support/core_fixture.hpp"
#include "support/fake_triton.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::testing {
namespace {

using namespace std::chrono_literals;

// What a test sees happen, in order: compiles starting and ending, launches (by key).
class EventLog {
 public:
  void add(std::string event) {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  std::vector<std::string> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    events_.clear();
  }
  bool has(const std::string& event) const {
    const auto all = events();
    return std::find(all.begin(), all.end(), event) != all.end();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> events_;
};

// The fake Triton compiler, held closed until open() once closed, failing the keys it is told.
class GatedCompiler final : public LanguageCompiler {
 public:
  explicit GatedCompiler(EventLog& log) : log_(log), inner_("3.6.0") {}
  std::string version(std::string_view arch) override { return inner_.version(arch); }
  CompiledArtifact compile(const Program& program, std::string_view arch) override {
    log_.add("compile " + program.key_text);
    {
      std::unique_lock lock(mutex_);
      released_.wait(lock, [this] { return open_; });
    }
    if (program.key_text == failing) throw CompileError("test.coarsening", failing, "", "refused");
    log_.add("compiled " + program.key_text);
    return inner_.compile(program, arch);
  }
  void close() {
    std::lock_guard lock(mutex_);
    open_ = false;
  }
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    released_.notify_all();
  }
  std::string failing;

 private:
  EventLog& log_;
  FakeTritonCompiler inner_;
  std::mutex mutex_;
  std::condition_variable released_;
  bool open_ = true;
};

template <class Tensor>
struct CopyArguments {
  Tensor x;
  Tensor y;
  static constexpr auto fields() {
    return std::tuple{input("x", &CopyArguments::x), output("y", &CopyArguments::y)};
  }
};
using CopyArgs = CopyArguments<TensorRef>;
using CopyDescriptors = CopyArguments<TensorDesc>;

// Coarsened by `block` elements per program; a key serves lengths that are multiples of its
// block, so block 64 covers 128 and 256 (a fallback), and 256 covers neither (a bad one).
class CoarseningKernel final : public JitKernel<CoarseningKernel, BlockKey, CopyDescriptors> {
 public:
  BlockKey dispatch(const CopyDescriptors& call) const override {
    const std::int64_t length = call.x.size(0);
    return {length % 256 == 0 ? 256 : length % 128 == 0 ? 128 : 64};
  }
  std::optional<BlockKey> fallback(const BlockKey& key) const {
    if (key.block == fallback_block) return std::nullopt;
    return BlockKey{fallback_block};
  }
  Program program(const BlockKey& key) const override {
    Program program = FakeTritonKernel::instance().program(key);
    program.kernel_name = name();
    return program;
  }
  LaunchSpec<BlockKey> plan(const BlockKey& key, const CopyArgs& args) const {
    const std::int64_t length = args.x.desc.size(0);
    if (length % key.block != 0) {
      checks().fail("x", "length " + std::to_string(length) + " is not a multiple of " +
                             std::to_string(key.block));
    }
    LaunchSpec<BlockKey> spec;
    spec.key = key;
    spec.geometry.grid.x = static_cast<std::uint32_t>(length / key.block);
    spec.args.push(args.x.data).push(args.y.data).push(static_cast<std::int32_t>(length));
    spec.args.push(1.0f);
    return spec;
  }
  WarmupSpace<CopyDescriptors> warmup_space(std::vector<std::int64_t> lengths) const {
    WarmupSpace<CopyDescriptors> space(CopyDescriptors{TensorDesc::contiguous(DType::f32, {256}),
                                                       TensorDesc::contiguous(DType::f32, {256})});
    space.choices("length", lengths,
                  [](CopyDescriptors& d, std::int64_t n) { d.x.shape[0] = d.y.shape[0] = n; });
    return space;
  }
  int fallback_block = 64;

 private:
  friend JitKernel;
  CoarseningKernel() : JitKernel("test.coarsening") {}
};

class Fallback : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    compiler = std::make_shared<GatedCompiler>(log);
    Runtime::instance().set_language_compiler(Language::triton, compiler);
    backend->on_launch = [this] { log.add("launch " + backend->launches.back().key); };
    kernel().fallback_block = 64;
  }
  void TearDown() override {
    compiler->open();
    EXPECT_TRUE(BackgroundCompiles::instance().wait_idle(10s));
    Runtime::instance().set_language_compiler(Language::triton, nullptr);
    CoreTest::TearDown();
  }
  static CoarseningKernel& kernel() { return CoarseningKernel::instance(); }

  // Warms the lengths' keys and their fallbacks, with the monitor in `mode`.
  WarmupReport warm(std::vector<std::int64_t> lengths, MonitorMode mode = MonitorMode::fallback) {
    Monitor::instance().set_mode(mode);
    WarmupRegistry registry;
    registry.add(kernel(), "t", [lengths] { return kernel().warmup_space(lengths); });
    WarmupOptions options;
    options.progress = ProgressStyle::none;
    return registry.warmup(options);
  }
  static CopyArgs call_of(std::int64_t length) {
    const auto desc = TensorDesc::contiguous(DType::f32, {length});
    return {make_tensor_ref(reinterpret_cast<void*>(0x100000), desc),
            make_tensor_ref(reinterpret_cast<void*>(0x900000), desc)};
  }
  KernelCounters counters() const { return kernel().counters(); }

  EventLog log;
  std::shared_ptr<GatedCompiler> compiler;
};

TEST_F(Fallback, WarmupWarmsEveryKeysFallback) {
  const WarmupReport report = warm({256});
  ASSERT_TRUE(report.ok()) << report.to_json();
  std::vector<std::string> keys;
  for (const auto& key : report.keys) keys.push_back(key.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"block=256", "block=64"}));
  EXPECT_TRUE(report.monitor_armed);
}

TEST_F(Fallback, AMissLaunchesTheFallbackAndReturnsBeforeTheBackgroundCompileEnds) {
  ASSERT_TRUE(warm({256}).ok());
  log.clear();
  compiler->close();
  kernel()(call_of(384));  // dispatch: block=128, never warmed
  // The call came back with the fallback launched while the key's compile is still held.
  EXPECT_TRUE(log.has("launch block=64"));
  EXPECT_FALSE(log.has("compiled block=128"));
  EXPECT_EQ(backend->launches.back().geometry.grid.x, 384u / 64u);
  kernel()(call_of(384));  // still compiling: the fallback again, no second compile queued
  compiler->open();
  ASSERT_TRUE(BackgroundCompiles::instance().wait_idle(10s));
  kernel()(call_of(384));
  const auto events = log.events();
  const std::vector<std::string> expected{"launch block=64", "launch block=64",
                                          "compiled block=128", "launch block=128"};
  std::vector<std::string> seen;
  for (const auto& event : events) {
    if (event.rfind("launch", 0) == 0 || event.rfind("compiled", 0) == 0) seen.push_back(event);
  }
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(std::count(events.begin(), events.end(), "compile block=128"), 1);
  const KernelCounters c = counters();
  EXPECT_EQ(c.fallback_launches, 2u);
  EXPECT_EQ(c.background_compiles, 1u);
  EXPECT_EQ(c.background_failures, 0u);
  kernel()(call_of(384));  // a hit now
  EXPECT_EQ(backend->launches.back().key, "block=128");
  EXPECT_EQ(counters().fallback_launches, 2u);
}

TEST_F(Fallback, DuringACaptureTheFallbackServesAndNothingCompiles) {
  ASSERT_TRUE(warm({256}).ok());
  log.clear();
  backend->capturing = true;
  kernel()(call_of(384));
  EXPECT_EQ(backend->launches.back().key, "block=64");
  EXPECT_TRUE(BackgroundCompiles::instance().wait_idle(10s));
  for (const auto& event : log.events()) EXPECT_NE(event.rfind("compile", 0), 0u) << event;
  EXPECT_EQ(log.events(), std::vector<std::string>{"launch block=64"});
  backend->capturing = false;
  // Once the capture ends, the next miss queues the compile.
  kernel()(call_of(384));
  ASSERT_TRUE(BackgroundCompiles::instance().wait_idle(10s));
  EXPECT_TRUE(log.has("compiled block=128"));
}

TEST_F(Fallback, AFailedBackgroundCompileIsSaidOnceAndTheFallbackKeepsServing) {
  ASSERT_TRUE(warm({256}).ok());
  compiler->failing = "block=128";
  for (int i = 0; i < 3; ++i) {
    kernel()(call_of(384));
    ASSERT_TRUE(BackgroundCompiles::instance().wait_idle(10s));
  }
  EXPECT_EQ(backend->launches.back().key, "block=64");
  const auto events = log.events();
  EXPECT_EQ(std::count(events.begin(), events.end(), "compile block=128"), 1);
  EXPECT_EQ(counters().background_failures, 1u);
  EXPECT_EQ(counters().fallback_launches, 3u);
}

TEST_F(Fallback, WithoutAWarmedFallbackAMissBehavesAsInWarnMode) {
  kernel().fallback_block = 32;   // a key dispatch never gives: only warmed as a fallback
  ASSERT_TRUE(warm({128}).ok());  // warms block=128 and its fallback block=32
  // A length of 64 dispatches block=64, whose fallback is block=32: warmed, so it serves.
  kernel()(call_of(64));
  EXPECT_EQ(backend->launches.back().key, "block=32");
  ASSERT_TRUE(BackgroundCompiles::instance().wait_idle(10s));
  // A kernel whose fallback was never warmed (a reset drops every executor): the call compiles
  // its own key on the calling thread, as warn mode does, and never loops through the fallback.
  kernel().reset_for_testing();
  Monitor::instance().arm();
  kernel()(call_of(384));
  EXPECT_EQ(backend->launches.back().key, "block=128");
  EXPECT_EQ(counters().fallback_launches, 0u);
  EXPECT_EQ(counters().background_compiles, 0u);
  EXPECT_FALSE(warnings.empty());  // reported as warn reports it
}

TEST_F(Fallback, AFallbackThatWouldRefuseACallItsKeyAcceptsFailsThatKeyNamingBoth) {
  kernel().fallback_block = 256;  // block 64's and 128's calls are not multiples of 256
  const WarmupReport report = warm({64, 256});
  EXPECT_FALSE(report.ok());
  EXPECT_FALSE(report.monitor_armed);
  int failed = 0;
  for (const auto& key : report.keys) {
    if (key.error.empty()) continue;
    ++failed;
    EXPECT_EQ(key.key, "block=64");
    EXPECT_NE(key.error.find("its fallback [block=256] would refuse a call the key accepts"),
              std::string::npos)
        << key.error;
    EXPECT_NE(key.error.find("not a multiple of 256"), std::string::npos) << key.error;
  }
  EXPECT_EQ(failed, 1);
}

TEST_F(Fallback, OtherModesNeverLaunchAFallback) {
  ASSERT_TRUE(warm({256}, MonitorMode::error).ok());
  EXPECT_THROW(kernel()(call_of(384)), RuntimeJitError);
  Monitor::instance().set_mode(MonitorMode::warn);
  kernel()(call_of(384));
  EXPECT_EQ(backend->launches.back().key, "block=128");
  EXPECT_EQ(counters().fallback_launches, 0u);
  EXPECT_EQ(counters().background_compiles, 0u);
}

// A serving process's misses (recorded as they happen) warm exactly those keys next boot.
TEST_F(Fallback, TheNextWarmupCompilesExactlyTheRecordedMisses) {
  const std::string file =
      ::testing::TempDir() + "zerojit-fallback-misses-" + std::to_string(::getpid()) + ".jsonl";
  std::remove(file.c_str());
  set_misses_file(file);
  ASSERT_TRUE(warm({256}).ok());
  kernel()(call_of(384));  // block=128 misses (served by its fallback)
  kernel()(call_of(192));  // block=64: warmed as a fallback, a hit, not a miss
  kernel()(call_of(256));  // a hit
  ASSERT_TRUE(BackgroundCompiles::instance().wait_idle(10s));
  set_misses_file(std::nullopt);
  {
    std::ofstream out(file, std::ios::app);
    out << R"({"zerojit_miss":1,"kernel":"test.absent","key":"n=1","key_json":{"n":1},"time":5})"
        << "\n";
  }

  kernel().reset_for_testing();  // the next boot
  log.clear();
  WarmupRegistry registry;
  const std::vector<std::string> notes = registry.add_learned(read_misses(file));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("kernel test.absent [n=1]: no such kernel"), std::string::npos);
  EXPECT_EQ(registry.manifest().lines(), std::vector<std::string>{"test.coarsening block=128"});
  WarmupOptions options;
  options.progress = ProgressStyle::none;
  const WarmupReport report = registry.warmup(options);
  ASSERT_TRUE(report.ok()) << report.to_json();
  EXPECT_EQ(log.events(), (std::vector<std::string>{"compile block=128", "compiled block=128"}));
  std::remove(file.c_str());
}

}  // namespace
}  // namespace zerojit::testing

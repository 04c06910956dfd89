// The kernel contract on a recording backend: launch-spec return rules, the finalizer's
// timing, argument checks, capture refusal, the monitor's modes and counters, and the
// registry's union, dedupe and gating. NVRTC compiles for real; nothing touches a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "support/core_fixture.hpp"

namespace zerojit {
namespace {

using testing::CoreTest;

constexpr EmbeddedFile kFiles[] = {
    {"contract/k.cu",
     "extern \"C\" __global__ void k(long long a, int b) { (void)a; (void)b; }\n"
     "#if VARIANT == 13\n#error variant 13 does not build\n#endif\n"},
};
const EmbeddedFileSet kSet{kFiles};

struct ContractKey {
  int variant = 0;
  static constexpr auto fields() { return std::tuple{field("variant", &ContractKey::variant)}; }
  auto operator<=>(const ContractKey&) const = default;
};

struct ContractDesc {
  std::int64_t tokens = 1;
  static constexpr auto fields() { return std::tuple{field("tokens", &ContractDesc::tokens)}; }
};

struct Outputs {
  std::vector<int> written;
};

class ContractKernel final : public JitKernel<ContractKernel, ContractKey, ContractDesc> {
 public:
  ContractKernel(std::string name = "test.contract", const EmbeddedFileSet* files = &kSet,
                 std::string source_path = "contract/k.cu", std::string function = "k")
      : JitKernel(std::move(name)),
        files_(files),
        source_path_(std::move(source_path)),
        function_(std::move(function)) {}

  ContractKey dispatch(const ContractDesc& d) const override {
    if (d.tokens < 0) throw InvalidArgument(name(), "tokens", "must be >= 0");
    return {d.tokens == 13 ? 13 : (d.tokens < 512 ? 1 : 4)};  // 13: a key that fails to build
  }

  Program program(const ContractKey& key) const override {
    Program p;
    p.kernel_name = name();
    p.files = files_;
    p.source_path = source_path_;
    p.name_expressions = {function_};
    p.options = macro_definitions(key, "");
    p.key_text = describe(key);
    return p;
  }

  LaunchSpec<ContractKey> plan(std::int64_t tokens) const {
    LaunchSpec<ContractKey> spec;
    spec.key = dispatch({tokens});
    spec.geometry.grid.x = static_cast<std::uint32_t>(tokens);
    spec.geometry.block.x = 32;
    spec.args.push(static_cast<long long>(tokens)).push(7);
    return spec;
  }

  WarmupSpace<ContractDesc> space(std::vector<std::int64_t> tokens) const {
    WarmupSpace<ContractDesc> s;
    s.choices("tokens", std::move(tokens), [](ContractDesc& d, std::int64_t v) { d.tokens = v; });
    return s;
  }

 private:
  const EmbeddedFileSet* files_;
  std::string source_path_;
  std::string function_;
};

ContractKernel& contract_kernel() {
  static ContractKernel kernel;
  return kernel;
}

class Contract : public CoreTest {};

TEST_F(Contract, PlainSpecReturnsNothingAndLaunchesOnce) {
  auto& kernel = contract_kernel();
  static_assert(std::is_void_v<decltype(kernel.launch(kernel.plan(1), LaunchTarget{}))>);
  kernel.launch(kernel.plan(3), LaunchTarget{0, reinterpret_cast<cuda::Stream>(0x5)});
  ASSERT_EQ(backend->launches.size(), 1u);
  EXPECT_EQ(backend->launches[0].geometry.grid.x, 3u);
  EXPECT_EQ(backend->launches[0].arg_sizes, (std::vector<std::size_t>{8, 4}));
  EXPECT_EQ(backend->launches[0].stream, reinterpret_cast<cuda::Stream>(0x5));
}

TEST_F(Contract, SpecWithOutputsReturnsThem) {
  auto& kernel = contract_kernel();
  auto base = kernel.plan(2);
  LaunchSpecWithOutputs<ContractKey, Outputs> spec{base.key, base.geometry, base.args,
                                                   Outputs{{1, 2}}};
  const Outputs out = kernel.launch(std::move(spec), LaunchTarget{});
  EXPECT_EQ(out.written, (std::vector<int>{1, 2}));
  EXPECT_EQ(backend->launches.size(), 1u);
}

TEST_F(Contract, FinalizerRunsAfterTheLaunchAndItsResultIsReturned) {
  auto& kernel = contract_kernel();
  std::vector<std::string> order;
  backend->on_launch = [&] { order.push_back("launch"); };
  auto base = kernel.plan(2);
  auto finalize = [&](Outputs& outputs) {
    order.push_back("finalize");
    return outputs.written.size() * 10;
  };
  LaunchSpecWithFinalizer<ContractKey, Outputs, decltype(finalize)> spec{
      base.key, base.geometry, base.args, Outputs{{5, 6, 7}}, finalize};
  const std::size_t result = kernel.launch(std::move(spec), LaunchTarget{});
  EXPECT_EQ(result, 30u);
  EXPECT_EQ(order, (std::vector<std::string>{"launch", "finalize"}));
}

TEST_F(Contract, AnEmptyGridLaunchesAndCompilesNothing) {
  auto& kernel = contract_kernel();
  kernel.launch(kernel.plan(0), LaunchTarget{});
  EXPECT_TRUE(backend->launches.empty());
  EXPECT_EQ(kernel.counters().compiles, 0u);
}

TEST_F(Contract, WarmedKeyIsAHitWithoutCompileOrLoad) {
  auto& kernel = contract_kernel();
  kernel.launch(kernel.plan(1), LaunchTarget{});
  const auto first = kernel.counters();
  EXPECT_EQ(first.misses, 1u);
  EXPECT_EQ(first.compiles, 1u);
  EXPECT_EQ(first.loads, 1u);
  for (int i = 0; i < 5; ++i) kernel.launch(kernel.plan(100), LaunchTarget{});
  const auto after = kernel.counters();
  EXPECT_EQ(after.hits, 5u);
  EXPECT_EQ(after.compiles, 1u);
  EXPECT_EQ(after.loads, 1u);
  // Another device is another executor: a load, not a compile.
  kernel.launch(kernel.plan(1), LaunchTarget{1, nullptr});
  EXPECT_EQ(kernel.counters().compiles, 1u);
  EXPECT_EQ(kernel.counters().loads, 2u);
}

TEST_F(Contract, ArgumentSizeMismatchIsRefusedBeforeTheLaunch) {
  auto& kernel = contract_kernel();
  backend->param_count = 2;
  backend->param_sizes[0] = 8;
  backend->param_sizes[1] = 8;  // the "compiled kernel" takes 8 bytes where the plan packs 4
  try {
    kernel.launch(kernel.plan(1), LaunchTarget{});
    FAIL() << "expected LaunchError";
  } catch (const LaunchError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("test.contract"), std::string::npos) << message;
    EXPECT_NE(message.find("argument 1 is 4 bytes"), std::string::npos) << message;
  }
  EXPECT_TRUE(backend->launches.empty());
  backend->param_sizes[1] = 4;
  kernel.reset_for_testing();
  EXPECT_NO_THROW(kernel.launch(kernel.plan(1), LaunchTarget{}));
}

TEST_F(Contract, CompileDuringGraphCaptureIsAlwaysAnError) {
  auto& kernel = contract_kernel();
  backend->capturing = true;
  const ContractDesc descriptors{600};
  try {
    kernel.launch(kernel.plan(600), LaunchTarget{}, &descriptors);
    FAIL() << "expected RuntimeJitError";
  } catch (const RuntimeJitError& error) {
    EXPECT_EQ(error.kernel(), "test.contract");
    EXPECT_EQ(error.key(), "variant=4");
    EXPECT_EQ(error.descriptors(), "tokens=600");
    EXPECT_NE(std::string(error.what()).find("capturing"), std::string::npos);
  }
  EXPECT_EQ(kernel.counters().compiles, 0u);
  // A warmed key launches fine during capture.
  backend->capturing = false;
  kernel.launch(kernel.plan(600), LaunchTarget{});
  backend->capturing = true;
  EXPECT_NO_THROW(kernel.launch(kernel.plan(600), LaunchTarget{}));
}

WarmupRegistry registry_for(std::vector<std::int64_t> tokens) {
  WarmupRegistry registry;
  auto& kernel = contract_kernel();
  registry.add(kernel, "layer", [&kernel, tokens] { return kernel.space(tokens); });
  return registry;
}

TEST_F(Contract, MonitorErrorModeRefusesAnUnwarmedKeyNamingKernelKeyAndDescriptors) {
  auto& kernel = contract_kernel();
  Monitor::instance().set_mode(MonitorMode::error);
  const auto report = registry_for({1}).warmup(WarmupOptions{.progress = ProgressStyle::none});
  EXPECT_TRUE(report.monitor_armed);
  EXPECT_TRUE(Monitor::instance().armed());
  kernel.launch(kernel.plan(1), LaunchTarget{});  // warmed: fine
  const ContractDesc descriptors{4096};
  try {
    kernel.launch(kernel.plan(4096), LaunchTarget{}, &descriptors);
    FAIL() << "expected RuntimeJitError";
  } catch (const RuntimeJitError& error) {
    EXPECT_EQ(error.kernel(), "test.contract");
    EXPECT_EQ(error.key(), "variant=4");
    EXPECT_EQ(error.descriptors(), "tokens=4096");
  }
  EXPECT_TRUE(backend->launches.size() == 1u);
  const auto counters = kernel.counters();
  EXPECT_EQ(counters.runtime_jit, 1u);
  EXPECT_EQ(counters.compiles, 1u);  // only warmup's
}

// compile() has a key only; given the descriptors the key came from, the refusal names them.
TEST_F(Contract, ARefusedCompileNamesTheDescriptorsItWasGiven) {
  auto& kernel = contract_kernel();
  Monitor::instance().set_mode(MonitorMode::error);
  registry_for({1}).warmup(WarmupOptions{.progress = ProgressStyle::none});
  const ContractDesc descriptors{4096};
  const auto key = kernel.dispatch(descriptors);
  try {
    kernel.compile(key, "sm_90a", &descriptors);
    FAIL() << "expected RuntimeJitError";
  } catch (const RuntimeJitError& error) {
    EXPECT_EQ(error.key(), "variant=4");
    EXPECT_EQ(error.descriptors(), "tokens=4096");
    EXPECT_NE(std::string(error.what()).find("runtime descriptors: tokens=4096"), std::string::npos)
        << error.what();
  }
  // Without them there is nothing to name.
  try {
    kernel.compile(key, "sm_90a");
    FAIL() << "expected RuntimeJitError";
  } catch (const RuntimeJitError& error) {
    EXPECT_EQ(error.descriptors(), "");
  }
}

TEST_F(Contract, MonitorWarnModeReportsOncePerKeyUnlessVerbose) {
  auto& kernel = contract_kernel();
  Monitor::instance().set_mode(MonitorMode::warn);
  registry_for({1}).warmup(WarmupOptions{.progress = ProgressStyle::none});
  kernel.launch(kernel.plan(4096), LaunchTarget{});  // compiles, warns
  EXPECT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("test.contract [variant=4]"), std::string::npos) << warnings[0];
  kernel.launch(kernel.plan(1), LaunchTarget{1, nullptr});  // a module load on device 1: warns
  EXPECT_EQ(warnings.size(), 2u);
  kernel.reset_for_testing();
  kernel.launch(kernel.plan(4096), LaunchTarget{});  // variant=4 again: already reported
  EXPECT_EQ(warnings.size(), 2u);
  Monitor::instance().set_verbose(true);
  kernel.reset_for_testing();
  kernel.launch(kernel.plan(4096), LaunchTarget{});
  EXPECT_EQ(warnings.size(), 3u);
  EXPECT_EQ(Monitor::instance().events().size(), 4u);
}

TEST_F(Contract, MonitorOffNeverReportsAndCountersAreJson) {
  auto& kernel = contract_kernel();
  registry_for({1}).warmup(WarmupOptions{.progress = ProgressStyle::none});
  EXPECT_FALSE(Monitor::instance().armed());
  kernel.launch(kernel.plan(4096), LaunchTarget{});
  kernel.launch(kernel.plan(4096), LaunchTarget{});
  EXPECT_TRUE(warnings.empty());
  const std::string json = Monitor::instance().counters_json();
  EXPECT_NE(json.find(R"({"kernel":"test.contract","hits":1,"misses":1,"compiles":2,)"),
            std::string::npos)
      << json;
}

TEST_F(Contract, RegistryUnionsDedupesAndGates) {
  auto& kernel = contract_kernel();
  WarmupRegistry registry;
  const bool indexer_enabled = false;  // the runtime's predicate, shared with registration
  for (int layer = 0; layer < 4; ++layer) {
    // Every layer registers; duplicates (same kernel and tag) are dropped.
    registry.add(kernel, "layer", [&kernel] { return kernel.space({1, 2, 600}); });
  }
  registry.add(kernel, "prefill", [&kernel] { return kernel.space({8192, 3}); });
  if (indexer_enabled) registry.add(kernel, "never", [&kernel] { return kernel.space({13}); });
  EXPECT_EQ(registry.registration_count(), 2u);
  const Manifest manifest = registry.manifest();
  EXPECT_EQ(manifest.lines(),
            (std::vector<std::string>{"test.contract variant=1", "test.contract variant=4"}));
  EXPECT_EQ(
      manifest.to_json(),
      R"([{"kernel":"test.contract","key":{"variant":1}},{"kernel":"test.contract","key":{"variant":4}}])");
}

TEST_F(Contract, WarmupReportsFailuresByKernelAndKeyAndCompilesTheRest) {
  WarmupRegistry registry = registry_for({1, 13, 600});
  const auto report = registry.warmup(WarmupOptions{.jobs = 2, .progress = ProgressStyle::none});
  EXPECT_EQ(report.total_keys(), 3);
  EXPECT_EQ(report.compiled(), 2);
  EXPECT_EQ(report.failed(), 1);
  EXPECT_FALSE(report.ok());
  const auto failed = std::find_if(report.keys.begin(), report.keys.end(),
                                   [](const KeyReport& k) { return !k.error.empty(); });
  ASSERT_NE(failed, report.keys.end());
  EXPECT_EQ(failed->kernel, "test.contract");
  EXPECT_EQ(failed->key, "variant=13");
  EXPECT_NE(failed->error.find("does not build"), std::string::npos) << failed->error;
  // The recording backend has one device: every good key was loaded on it.
  EXPECT_EQ(report.devices, std::vector<int>{0});
  EXPECT_EQ(backend->loads.size(), 2u);
  // A second warmup finds everything in memory.
  const auto again = registry.warmup(WarmupOptions{.progress = ProgressStyle::none});
  EXPECT_EQ(again.from_memory(), 2);
  EXPECT_EQ(again.compiled(), 0);
}

// A kernel whose program is several times the contract kernel's: warmup should start it first.
constexpr EmbeddedFile kLargeFiles[] = {
    {"contract/large.cu",
     "// A long comment stands in for a kernel with more code to compile. ...................\n"
     "// ....................................................................................\n"
     "// ....................................................................................\n"
     "extern \"C\" __global__ void large() {}\n"},
};
const EmbeddedFileSet kLargeSet{kLargeFiles};

TEST_F(Contract, WarmupStartsTheLargestProgramFirstAndReportsInManifestOrder) {
  auto& small = contract_kernel();
  static ContractKernel large("test.large", &kLargeSet, "contract/large.cu", "large");
  WarmupRegistry registry;
  registry.add(small, "layer", [&small] { return small.space({1}); });
  registry.add(large, "layer", [] { return large.space({1}); });
  const auto report = registry.warmup(WarmupOptions{.jobs = 1, .progress = ProgressStyle::none});
  ASSERT_EQ(backend->loads.size(), 2u);
  EXPECT_EQ(backend->loads[0].rfind("test.large", 0), 0u) << backend->loads[0];
  EXPECT_EQ(backend->loads[1].rfind("test.contract", 0), 0u) << backend->loads[1];
  ASSERT_EQ(report.keys.size(), 2u);
  EXPECT_EQ(report.keys[0].kernel, "test.contract");  // the report keeps registration order
  EXPECT_EQ(report.keys[1].kernel, "test.large");
}

TEST_F(Contract, CompileOnlyWarmupLoadsNothingAndUsesTheNamedArch) {
  WarmupRegistry registry = registry_for({1, 600});
  const auto report = registry.warmup(
      WarmupOptions{.arch = "sm_100a", .compile_only = true, .progress = ProgressStyle::none});
  EXPECT_EQ(report.archs, std::vector<std::string>{"sm_100a"});
  EXPECT_TRUE(report.devices.empty());
  EXPECT_TRUE(backend->loads.empty());
  EXPECT_EQ(report.compiled(), 2);
}

TEST_F(Contract, AFailedWarmupNeverArmsTheMonitorAndReportsEachKeyToTheProgressCallback) {
  Monitor::instance().set_mode(MonitorMode::warn);
  std::mutex mutex;
  std::vector<std::pair<std::string, std::size_t>> seen;  // key, done
  std::size_t total_seen = 0;
  WarmupOptions options{.jobs = 2, .progress = ProgressStyle::none};
  options.on_progress = [&](const WarmupProgress& progress) {
    std::lock_guard lock(mutex);
    seen.emplace_back(progress.key->key, progress.done);
    total_seen = progress.total;
  };
  const auto report = registry_for({1, 13}).warmup(options);  // variant 13 does not build
  EXPECT_FALSE(report.ok());
  EXPECT_FALSE(report.monitor_armed);
  EXPECT_FALSE(Monitor::instance().armed());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(total_seen, 2u);
  std::set<std::size_t> done;
  std::set<std::string> keys;
  for (const auto& [key, count] : seen) {
    done.insert(count);
    keys.insert(key);
  }
  EXPECT_EQ(done, (std::set<std::size_t>{1, 2}));
  EXPECT_EQ(keys, (std::set<std::string>{"variant=1", "variant=13"}));
  // The same registry without the failing key arms it.
  EXPECT_TRUE(
      registry_for({1}).warmup(WarmupOptions{.progress = ProgressStyle::none}).monitor_armed);
  Monitor::instance().disarm();
  Monitor::instance().set_mode(MonitorMode::off);
}

TEST_F(Contract, AMonitorCallbackAskingForTheKeyBeingCompiledIsRefusedNotDeadlocked) {
  // The monitor's callback runs inside the compile it reports, while this thread holds the key's
  // single-flight claim: asking for the same key there would wait for itself forever.
  auto& kernel = contract_kernel();
  const ContractKey key{21};
  std::string refused;
  Monitor& monitor = Monitor::instance();
  monitor.set_mode(MonitorMode::warn);
  monitor.arm();
  monitor.set_event_callback([&](const JitEvent&) {
    try {
      kernel.warm(key, "sm_90a", {});
    } catch (const Error& error) {
      refused = error.what();
    }
  });
  // Bounded: were it to wait for itself, the test fails instead of hanging.
  auto done = std::async(std::launch::async, [&] { return kernel.warm(key, "sm_90a", {}); });
  const bool finished = done.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  monitor.set_event_callback(nullptr);
  monitor.disarm();
  monitor.set_mode(MonitorMode::off);
  ASSERT_TRUE(finished) << "the nested acquire waited for itself";
  EXPECT_EQ(done.get().origin, ArtifactOrigin::compiled);
  EXPECT_NE(refused.find("acquired again by the thread that is compiling it"), std::string::npos)
      << refused;
  EXPECT_NE(refused.find("test.contract [variant=21]"), std::string::npos) << refused;
}

TEST_F(Contract, AddExpansionRegistersPrebuiltEntriesOnceAndWarmsThem) {
  auto& kernel = contract_kernel();
  WarmupRegistry registry;
  int expansions = 0;
  const auto expand = [&](std::vector<ManifestEntry>& entries, std::vector<std::string>& dead) {
    ++expansions;
    dead = {"unused_axis"};
    const ContractKey key{1};
    ManifestEntry entry;
    entry.kernel = &kernel;
    entry.key_text = describe(key);
    entry.key_json = to_json_text(key);
    entry.warm = [&kernel, key](std::string_view arch, std::span<const int> devices) {
      return kernel.warm(key, arch, devices);
    };
    entries.push_back(std::move(entry));
  };
  registry.add_expansion(kernel, "prebuilt", expand);
  registry.add_expansion(kernel, "prebuilt", expand);  // a duplicate (kernel, tag): dropped
  EXPECT_EQ(registry.registration_count(), 1u);
  const Manifest manifest = registry.manifest();
  ASSERT_EQ(manifest.size(), 1u);
  ASSERT_EQ(manifest.dead_axes.size(), 1u);
  EXPECT_EQ(manifest.dead_axes[0].axis, "unused_axis");
  EXPECT_EQ(manifest.dead_axes[0].tag, "prebuilt");
  const auto report = registry.warmup(WarmupOptions{.progress = ProgressStyle::none});
  EXPECT_EQ(report.compiled(), 1);
  EXPECT_EQ(expansions, 2);
}

}  // namespace
}  // namespace zerojit

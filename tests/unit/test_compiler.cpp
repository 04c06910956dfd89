// NVRTC for real: identities, compiling for a named arch on a machine without a GPU, and the
// failure message.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "examples/examples.hpp"
#include "support/core_fixture.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit {
namespace {

using testing::CoreTest;

// Kernel files local to these tests: one that includes a header, one that does not compile.
constexpr EmbeddedFile kTestFiles[] = {
    {"test/ok.cu",
     "#include \"test/inc.cuh\"\nextern \"C\" __global__ void ok(int* p) { *p = kValue; }\n"},
    {"test/inc.cuh",
     "#pragma once\n#include \"test/deep.cuh\"\nconstexpr int kValue = kDeep + 1;\n"},
    {"test/deep.cuh", "#pragma once\nconstexpr int kDeep = 41;\n"},
    {"test/bad.cu", "__global__ void bad(int* p) { *p = undeclared_name; }\n"},
    {"test/missing.cu", "#include \"test/nowhere.cuh\"\n"},
};
const EmbeddedFileSet kTestSet{kTestFiles};

Program ok_program() {
  Program program;
  program.kernel_name = "test.ok";
  program.files = &kTestSet;
  program.source_path = "test/ok.cu";
  program.name_expressions = {"ok"};
  program.key_text = "variant=1";
  return program;
}

TEST(ProgramIdentity, FollowsIncludesByContent) {
  const ResolvedSource resolved = resolve_program_source(ok_program());
  ASSERT_EQ(resolved.headers.size(), 2u);
  EXPECT_EQ(resolved.headers[0].path, "test/inc.cuh");
  EXPECT_EQ(resolved.headers[1].path, "test/deep.cuh");
}

TEST(ProgramIdentity, SameInputsSameHashAnyInputChangedAnotherHash) {
  const Program base = ok_program();
  const ProgramIdentity reference = compute_identity(base, "sm_90a", "13.0");
  EXPECT_EQ(compute_identity(ok_program(), "sm_90a", "13.0"), reference);
  EXPECT_EQ(ProgramIdentity::from_hex(reference.hex()), reference);

  std::vector<ProgramIdentity> variants;
  variants.push_back(compute_identity(base, "sm_100a", "13.0"));  // arch
  variants.push_back(compute_identity(base, "sm_90a", "13.1"));   // NVRTC version
  Program p = base;
  p.options.push_back("-DX=1");  // options
  variants.push_back(compute_identity(p, "sm_90a", "13.0"));
  p = base;
  p.key_text = "variant=2";  // key rendering
  variants.push_back(compute_identity(p, "sm_90a", "13.0"));
  p = base;
  p.name_expressions = {"ok2"};  // name expressions
  variants.push_back(compute_identity(p, "sm_90a", "13.0"));
  p = base;
  p.kernel_name = "test.other";  // kernel
  variants.push_back(compute_identity(p, "sm_90a", "13.0"));
  // A header two levels down changes by one character.
  constexpr EmbeddedFile kChanged[] = {
      kTestFiles[0], kTestFiles[1], {"test/deep.cuh", "#pragma once\nconstexpr int kDeep = 42;\n"}};
  const EmbeddedFileSet changed_set{kChanged};
  p = base;
  p.files = &changed_set;
  variants.push_back(compute_identity(p, "sm_90a", "13.0"));
  for (std::size_t i = 0; i < variants.size(); ++i) {
    EXPECT_NE(variants[i], reference) << "variant " << i;
    for (std::size_t j = 0; j < i; ++j) EXPECT_NE(variants[i], variants[j]) << i << " vs " << j;
  }
  // Which component changed is visible too (for explaining cache misses).
  const auto a = identity_components(base, "sm_90a", "13.0");
  const auto b = identity_components(p, "sm_90a", "13.0");
  EXPECT_NE(a.source, b.source);
  EXPECT_EQ(a.options, b.options);
  EXPECT_EQ(a.arch, b.arch);
}

TEST(ProgramIdentity, MissingIncludeNamesKernelAndFile) {
  Program p = ok_program();
  p.source_path = "test/missing.cu";
  try {
    compute_identity(p, "sm_90a", "13.0");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("test.ok"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("test/nowhere.cuh"), std::string::npos);
  }
}

TEST(Compiler, CompilesForNamedArchitecturesWithoutAGpu) {
  ASSERT_TRUE(nvrtc_available()) << nvrtc_unavailable_reason();
  for (const char* arch : {"sm_90a", "sm_100a"}) {
    const Program p = ok_program();
    const auto identity = compute_identity(p, arch, nvrtc_version());
    const CompiledArtifact artifact = compile_program(p, arch, identity);
    ASSERT_GE(artifact.cubin.size(), 4u);
    EXPECT_EQ(artifact.cubin.substr(0, 4),
              "\x7f"
              "ELF")
        << arch;
    EXPECT_EQ(artifact.lowered("ok"), "ok");
    EXPECT_EQ(artifact.arch, arch);
    EXPECT_EQ(artifact.identity, identity);
  }
}

TEST(Compiler, FailureCarriesKernelKeyAndLog) {
  Program p = ok_program();
  p.kernel_name = "test.bad";
  p.source_path = "test/bad.cu";
  p.key_text = "block=7";
  p.name_expressions = {"bad"};
  try {
    compile_program(p, "sm_90a", compute_identity(p, "sm_90a", nvrtc_version()));
    FAIL() << "expected a CompileError";
  } catch (const CompileError& error) {
    EXPECT_EQ(error.kernel(), "test.bad");
    EXPECT_EQ(error.key(), "block=7");
    EXPECT_NE(error.log().find("undeclared_name"), std::string::npos) << error.log();
    const std::string message = error.what();
    EXPECT_NE(message.find("test.bad"), std::string::npos);
    EXPECT_NE(message.find("block=7"), std::string::npos);
    EXPECT_NE(message.find("undeclared_name"), std::string::npos);
  }
}

TEST(Compiler, RejectsUnknownArchitectures) {
  EXPECT_THROW(validate_arch("sm90"), Error);
  EXPECT_THROW(validate_arch("compute_90a"), Error);
  EXPECT_THROW(validate_arch("sm_9"), Error);
  EXPECT_THROW(validate_arch("sm_90ab"), Error);
  EXPECT_NO_THROW(validate_arch("sm_90a"));
  EXPECT_NO_THROW(validate_arch("sm_100f"));
  EXPECT_NO_THROW(validate_arch("sm_89"));
}

// Before: an arch NVRTC does not know failed every key of a warmup, each with NVRTC's own
// "invalid --gpu-architecture" log; now the warmup refuses it once, naming the range.
TEST(Compiler, KnowsTheArchsItsNvrtcCompilesFor) {
  ASSERT_TRUE(nvrtc_available()) << nvrtc_unavailable_reason();
  const std::vector<int> archs = nvrtc_supported_archs();
  ASSERT_FALSE(archs.empty());
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
  EXPECT_NE(std::find(archs.begin(), archs.end(), 100), archs.end());
  EXPECT_NO_THROW(check_arch_supported("sm_90a"));
  EXPECT_NO_THROW(check_arch_supported("sm_100f"));
  try {
    check_arch_supported("sm_999");
    ADD_FAILURE() << "sm_999 was accepted";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("cannot compile for sm_999"), std::string::npos) << message;
    EXPECT_NE(message.find("sm_" + std::to_string(*std::min_element(archs.begin(), archs.end()))),
              std::string::npos)
        << message;
  }
  EXPECT_THROW(check_arch_supported("sm_9"), Error);  // malformed: validate_arch's error

  WarmupRegistry registry;
  examples::register_examples(registry);
  try {
    registry.warmup(
        WarmupOptions{.arch = "sm_999", .compile_only = true, .progress = ProgressStyle::none});
    ADD_FAILURE() << "a warmup for sm_999 ran";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("cannot compile for sm_999"), std::string::npos);
  }
}

TEST(Compiler, FindsCudaHeaders) {
  EXPECT_NO_THROW(cuda_include_dir());
  EXPECT_EQ(cuda::target_arch_for(9, 0), "sm_90a");
  EXPECT_EQ(cuda::target_arch_for(10, 0), "sm_100a");
  EXPECT_EQ(cuda::target_arch_for(8, 9), "sm_89");
}

class SingleFlight : public CoreTest {};

TEST_F(SingleFlight, ManyThreadsAskingForOneKeyCauseOneCompile) {
  auto& kernel = examples::ScaleAddKernel::instance();
  const examples::ScaleAddKey key{DType::f32, 4};
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<const CompiledArtifact>> results(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back(
          [&, t] { results[static_cast<std::size_t>(t)] = kernel.compile(key, "sm_90a"); });
    }
  }
  EXPECT_EQ(kernel.counters().compiles, 1u);
  for (const auto& artifact : results) EXPECT_EQ(artifact.get(), results[0].get());
}

TEST_F(SingleFlight, ManyThreadsMissingOneExecutorCauseOneLoad) {
  auto& kernel = examples::ScaleAddKernel::instance();
  constexpr int kThreads = 8;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] { kernel(scale_add_args(DType::f64, 1024)); });
    }
  }
  EXPECT_EQ(kernel.counters().compiles, 1u);
  EXPECT_EQ(backend->loads.size(), 1u);
  EXPECT_EQ(backend->launches.size(), static_cast<std::size_t>(kThreads));
}

TEST_F(SingleFlight, CompileManyReportsEachKey) {
  auto& kernel = examples::ScaleAddKernel::instance();
  const std::vector<examples::ScaleAddKey> keys = {
      {DType::f32, 1}, {DType::f32, 4}, {DType::i8, 1}, {DType::f64, 1}};
  const auto outcomes = kernel.compile_many(keys, "sm_90a", 2);
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_TRUE(outcomes[0].artifact && outcomes[1].artifact && outcomes[3].artifact);
  EXPECT_FALSE(outcomes[2].artifact);
  EXPECT_NE(outcomes[2].error.find("examples.scale_add"), std::string::npos) << outcomes[2].error;
  EXPECT_NE(outcomes[2].error.find("i8"), std::string::npos);
  EXPECT_EQ(kernel.counters().compiles, 3u);
}

}  // namespace
}  // namespace zerojit

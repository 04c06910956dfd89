// Kernel languages other than CUDA C++ in the core, with a C++ stand-in for the Triton compiler
// (the Python module installs the real one; python/tests/lang_cpu_triton.py tests it): the
// identity of such a program, the compiler version in it and its fallback to the versions a
// cache records, entries of layout 2 (language, launch record) and layout 1 still read, the
// launch record's checks, launches whose geometry the record fixes, and launch attributes.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <memory>
#include <string>

#include "languages/triton/launch_record.hpp"
#include "support/core_fixture.hpp"
#include "support/fake_triton.hpp"
#include "unit/disk_cache/support.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace zerojit {
namespace {

using languages::decode_launch_record;
using languages::encode_launch_record;
using languages::LaunchRecord;
using testing::CoreTest;
using testing::FakeTritonCompiler;
using testing::FakeTritonKernel;
using testing::kSource;
using testing::sample_record;

class Languages : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    compiler = std::make_shared<FakeTritonCompiler>("triton-3.6.0+ptxas-12.8.93");
    Runtime::instance().set_language_compiler(Language::triton, compiler);
  }
  void TearDown() override {
    Runtime::instance().set_language_compiler(Language::triton, nullptr);
    Runtime::instance().set_artifact_store(nullptr);
    CoreTest::TearDown();
  }
  std::shared_ptr<FakeTritonCompiler> compiler;
};

TEST_F(Languages, TheLanguagesCompilerBuildsTheArtifactAndItsVersionIsInTheIdentity) {
  FakeTritonKernel kernel;
  const auto artifact = kernel.compile({512}, "sm_90a");
  EXPECT_EQ(compiler->compiles, 1);
  EXPECT_EQ(artifact->language, Language::triton);
  EXPECT_EQ(artifact->cubin, "IMAGE:" + kernel.program({512}).compile_request);
  EXPECT_EQ(artifact->compiler_version, "triton-3.6.0+ptxas-12.8.93");
  EXPECT_EQ(artifact->identity,
            compute_identity(kernel.program({512}), "sm_90a", "triton-3.6.0+ptxas-12.8.93"));
  EXPECT_EQ(decode_launch_record(artifact->launch_record, "k"), sample_record());
  kernel.compile({512}, "sm_90a");  // from memory
  EXPECT_EQ(compiler->compiles, 1);
}

TEST_F(Languages, TheRequestAndTheSourceAreTheIdentityNotAnIncludeResolution) {
  FakeTritonKernel kernel;
  const Program base = kernel.program({256});
  const ProgramIdentity identity = compute_identity(base, "sm_90a", "v");
  Program other_request = base;
  other_request.compile_request += "x";
  EXPECT_NE(compute_identity(other_request, "sm_90a", "v"), identity);
  const EmbeddedFile changed[] = {{kSource[0].path, "@triton.jit\ndef masked_add(x, BLOCK): 1\n"}};
  const EmbeddedFileSet changed_set{changed};
  Program other_source = base;
  other_source.files = &changed_set;
  EXPECT_NE(compute_identity(other_source, "sm_90a", "v"), identity);
  EXPECT_NE(compute_identity(base, "sm_90a", "w"), identity);
  Program as_cuda = base;
  as_cuda.language = Language::cuda;  // as CUDA C++ the #include must resolve, and cannot
  EXPECT_THROW(compute_identity(as_cuda, "sm_90a", "v"), Error);
}

TEST_F(Languages, WithoutTheCompilerTheCacheRecordedVersionFindsThePackEntries) {
  test::TempDir pack;
  auto store = std::make_shared<DiskCache>(DiskCacheOptions{.root = pack.path()});
  Runtime::instance().set_artifact_store(store);
  FakeTritonKernel kernel;
  kernel.compile({256}, "sm_90a");
  EXPECT_EQ(store->recorded_compiler_versions(Language::triton, "sm_90a"),
            std::vector<std::string>{"triton-3.6.0+ptxas-12.8.93"});
  EXPECT_TRUE(store->recorded_compiler_versions(Language::triton, "sm_100a").empty());
  EXPECT_TRUE(store->recorded_compiler_versions(Language::cuda, "sm_90a").empty());

  // A serving process: no Triton, a fresh kernel, the same cache.
  kernel.reset_for_testing();
  auto absent = std::make_shared<FakeTritonCompiler>("");
  Runtime::instance().set_language_compiler(Language::triton, absent);
  ArtifactOrigin origin;
  const auto served = kernel.compile_with_origin({256}, "sm_90a", origin);
  EXPECT_EQ(origin, ArtifactOrigin::disk);
  EXPECT_EQ(absent->compiles, 0);
  EXPECT_EQ(served->launch_record, encode_launch_record(sample_record()));
  EXPECT_EQ(served->language, Language::triton);

  // Entries of two Triton versions for the arch: no version can be chosen without Triton.
  Runtime::instance().set_language_compiler(Language::triton,
                                            std::make_shared<FakeTritonCompiler>("triton-3.5.1"));
  kernel.compile({128}, "sm_90a");
  Runtime::instance().set_language_compiler(Language::triton, absent);
  try {
    Runtime::instance().compiler_version(Language::triton, "sm_90a");
    FAIL() << "expected UnavailableError";
  } catch (const UnavailableError& error) {
    EXPECT_NE(std::string(error.what()).find("triton-3.5.1"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("not installed"), std::string::npos) << error.what();
  }
}

TEST_F(Languages, AnEntryKeepsItsLanguageRecordAndRequestAndALayoutOneEntryIsStillRead) {
  CompiledArtifact artifact;
  artifact.kernel_name = "k";
  artifact.key_text = "block=256";
  artifact.arch = "sm_90a";
  artifact.compiler_version = "13.0";
  artifact.cubin = "CUBIN";
  artifact.lowered_names = {{"k<256>", "_Z1kILi256EEvv"}};
  artifact.components.kernel = 7;
  artifact.identity = identity_from_components(artifact.components);
  {
    const std::string bytes = encode_entry(artifact);
    const DecodedEntry decoded = decode_entry(std::as_bytes(std::span(bytes)));
    ASSERT_TRUE(decoded.ok()) << decoded.detail;
    EXPECT_EQ(decoded.artifact->language, Language::cuda);
  }
  // A Triton entry as the compiler makes it: its record and request come back as they went.
  FakeTritonKernel kernel;
  const auto compiled = kernel.compile({256}, "sm_90a");
  {
    const std::string bytes = encode_entry(*compiled);
    const DecodedEntry decoded = decode_entry(std::as_bytes(std::span(bytes)));
    ASSERT_TRUE(decoded.ok()) << decoded.detail;
    EXPECT_EQ(decoded.artifact->language, Language::triton);
    EXPECT_EQ(decoded.artifact->launch_record, compiled->launch_record);
    EXPECT_EQ(decoded.artifact->compile_request, kernel.program({256}).compile_request);
  }

  // Layout 1, as the first zerojit wrote it: no language, no record, no request. Rebuilt from
  // layout 3 by cutting those fields out and sealing it again.
  std::string bytes = encode_entry(artifact);
  const std::size_t tail = 4 + artifact.cubin.size() + 16;  // cubin field and checksum
  // u32 language, u32 empty record, u32 empty request, u32 no options
  const std::size_t language_at = bytes.size() - tail - 16;
  bytes.erase(language_at, 16);
  bytes[8] = 1;  // layout 1
  const std::uint64_t total = bytes.size();
  for (int i = 0; i < 8; ++i) bytes[16 + i] = static_cast<char>((total >> (8 * i)) & 0xff);
  const XXH128_hash_t sum = XXH3_128bits(bytes.data(), bytes.size() - 16);
  for (int i = 0; i < 8; ++i) {
    bytes[bytes.size() - 16 + i] = static_cast<char>((sum.high64 >> (8 * i)) & 0xff);
    bytes[bytes.size() - 8 + i] = static_cast<char>((sum.low64 >> (8 * i)) & 0xff);
  }
  const DecodedEntry old = decode_entry(std::as_bytes(std::span(bytes)));
  ASSERT_TRUE(old.ok()) << old.detail;
  EXPECT_EQ(old.artifact->language, Language::cuda);
  EXPECT_EQ(old.artifact->cubin, "CUBIN");
}

TEST(LaunchRecords, DamagedOrUnlaunchableRecordsAreRefusedNamingTheField) {
  EXPECT_EQ(decode_launch_record(encode_launch_record(sample_record()), "k"), sample_record());
  const auto refused = [](LaunchRecord record, const std::string& words) {
    try {
      decode_launch_record(encode_launch_record(record), "mylib.k");
      ADD_FAILURE() << "accepted: " << words;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("mylib.k"), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    }
  };
  LaunchRecord record = sample_record();
  record.block_threads = 33;
  refused(record, "block_threads 33");
  record = sample_record();
  record.params.push_back("tensordesc<fp16[64,64]>");
  refused(record, "tensordesc");
  record = sample_record();
  record.params.assign(kMaxKernelParams, "i32");
  refused(record, "parameters");
  record = sample_record();
  record.cluster_ctas = 17;
  refused(record, "\"cluster_ctas\" is 17");
  EXPECT_THROW(decode_launch_record("{\"entry\":1}", "k"), Error);
  EXPECT_THROW(decode_launch_record("not json", "k"), Error);

  record = sample_record();
  record.global_scratch_bytes = 64;
  refused(record, "global_scratch_bytes");
}

TEST_F(Languages, ARecordedLaunchTakesItsBlockClusterAttributesAndScratchFromTheRecord) {
  FakeTritonKernel kernel;
  const LaunchTarget target{0, reinterpret_cast<cuda::Stream>(0x5)};
  PackedCall call;
  call.geometry.grid = {3, 1, 1};
  call.args.push(static_cast<void*>(nullptr)).push(static_cast<void*>(nullptr));
  call.args.push(std::int32_t{1000}).push(0.5f);
  kernel.launch_packed({256}, call, target);
  ASSERT_EQ(backend->launches.size(), 1u);
  const testing::RecordedLaunch& launch = backend->launches.front();
  EXPECT_EQ(launch.geometry.grid, (Dim3{6, 1, 1}));  // 3 programs of a 2-CTA cluster
  EXPECT_EQ(launch.geometry.block, (Dim3{128, 1, 1}));
  EXPECT_TRUE(launch.geometry.attributes.programmatic_serialization);
  EXPECT_EQ(launch.geometry.attributes.cluster, (Dim3{2, 1, 1}));
  EXPECT_EQ(launch.arg_sizes, (std::vector<std::size_t>{8, 8, 4, 4, 8, 8}));
  EXPECT_EQ(launch.stream, target.stream);

  PackedCall empty_grid;
  empty_grid.geometry.grid = {0, 1, 1};
  kernel.launch_packed({256}, empty_grid, target);  // nothing, as Triton does
  EXPECT_EQ(backend->launches.size(), 1u);
}

}  // namespace
}  // namespace zerojit

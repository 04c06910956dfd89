// Language entries are verified whole: a Triton launch record or a CuTeDSL export that does not
// match its identity is never served. Each damage below keeps the entry's checksum sound (the
// entry is sealed again after the record is changed), so only the record's own decoder can
// refuse it: in decode_entry (every tier reads through it), in `zerojit cache verify` (exit 4,
// naming the entry and `malformed-record`), and in a warmup, which compiles exactly the damaged
// keys again and never loads a damaged record.
#include <functional>
#include <string>
#include <vector>

#include "support/core_fixture.hpp"
#include "support/fake_triton.hpp"
#include "unit/disk_cache/support.hpp"

namespace zerojit {
namespace {

using testing::CoreTest;
namespace fs = std::filesystem;

struct Damage {
  const char* what;
  std::function<void(CompiledArtifact&)> apply;
  const char* reported;  // words the problem's detail holds
};

void set_record(CompiledArtifact& artifact, std::string record) {
  artifact.launch_record = std::move(record);
}

void replace_in_record(CompiledArtifact& artifact, const std::string& from, const std::string& to) {
  const std::size_t at = artifact.launch_record.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  artifact.launch_record.replace(at, from.size(), to);
}

// The issue's damages of a Triton entry, each with what the decoder says of it.
std::vector<Damage> triton_damages() {
  return {
      {"a truncated record",
       [](CompiledArtifact& a) { a.launch_record.resize(a.launch_record.size() / 2); },
       "is not JSON"},
      {"bytes that are not JSON", [](CompiledArtifact& a) { set_record(a, "\x01\x02 not json"); },
       "is not JSON"},
      {"an empty record", [](CompiledArtifact& a) { set_record(a, ""); }, "is empty"},
      {"one parameter type where the kernel has four",
       [](CompiledArtifact& a) {
         replace_in_record(a, R"(["*fp32","*fp32","i32","fp32"])", R"(["*fp32"])");
       },
       "lists 1 parameters"},
      {"block_threads 2^30",
       [](CompiledArtifact& a) {
         replace_in_record(a, R"("block_threads":128)", R"("block_threads":1073741824)");
       },
       "\"block_threads\" is 1073741824"},
      {"shared_bytes -5",
       [](CompiledArtifact& a) {
         replace_in_record(a, R"("shared_bytes":0)", R"("shared_bytes":-5)");
       },
       "\"shared_bytes\" is -5"},
      {"scratch_pointers 100,000",
       [](CompiledArtifact& a) {
         replace_in_record(a, R"("scratch_pointers":2)", R"("scratch_pointers":100000)");
       },
       "\"scratch_pointers\" is 100000"},
      {"an unknown parameter type",
       [](CompiledArtifact& a) { replace_in_record(a, R"("i32")", R"("tensordesc<fp16>")"); },
       "cannot be launched"},
      {"a nesting 100,000 deep",  // refused by its size before anything parses it
       [](CompiledArtifact& a) {
         set_record(a, std::string(100000, '[') + std::string(100000, ']'));
       },
       "more than the 65536"},
      {"a nesting 20,000 deep, within the size bound",
       [](CompiledArtifact& a) {
         set_record(a, std::string(20000, '[') + std::string(20000, ']'));
       },
       "nests deeper than 8"},
      {"a compile request other than its identity's",
       [](CompiledArtifact& a) { a.compile_request = test::synthetic_triton_request(1); },
       "compile request is not the one its identity was made from"},
  };
}

DecodedEntry sealed_and_read(const CompiledArtifact& artifact) {
  const std::string bytes = encode_entry(artifact);
  return decode_entry(test::as_bytes(bytes), &artifact.identity);
}

TEST(EntryRecords, EveryDamageOfATritonRecordIsAMalformedRecordNamingWhatIsWrong) {
  const CompiledArtifact sound = test::synthetic_language_artifact(Language::triton);
  ASSERT_TRUE(sealed_and_read(sound).ok()) << sealed_and_read(sound).detail;
  for (const Damage& damage : triton_damages()) {
    CompiledArtifact damaged = sound;
    damage.apply(damaged);
    const DecodedEntry read = sealed_and_read(damaged);
    EXPECT_EQ(read.problem, EntryProblem::malformed_record) << damage.what << ": " << read.detail;
    EXPECT_NE(read.detail.find(damage.reported), std::string::npos)
        << damage.what << ": " << read.detail;
  }
}

TEST(EntryRecords, ACudaEntryCarryingARecordAndADamagedCuteExportAreMalformedRecords) {
  CompiledArtifact cuda = test::synthetic_artifact(64);
  cuda.launch_record = test::synthetic_triton_record();
  EXPECT_EQ(sealed_and_read(cuda).problem, EntryProblem::malformed_record);
  EXPECT_NE(sealed_and_read(cuda).detail.find("a CUDA C++ entry carries a launch record"),
            std::string::npos);

  const CompiledArtifact cute = test::synthetic_language_artifact(Language::cutedsl);
  ASSERT_TRUE(sealed_and_read(cute).ok()) << sealed_and_read(cute).detail;
  const std::pair<std::string, std::string> changes[] = {
      {R"("prefix":"zj_prefix0")", R"("prefix":"zj_other")"},
      {R"("dsl_version":"4.8.1")", R"("dsl_version":"4.7.0")"},
      {R"("abi":"cute-dsl-export-c-1")", R"("abi":"cute-dsl-export-c-2")"},
      {R"("abi")", R"("unknown":1,"abi")"},
  };
  for (const auto& [from, to] : changes) {
    CompiledArtifact damaged = cute;
    replace_in_record(damaged, from, to);
    EXPECT_EQ(sealed_and_read(damaged).problem, EntryProblem::malformed_record) << to;
  }
}

TEST(EntryRecords, AnEntryOfALanguageZerojitDoesNotKnowIsMalformedNamingTheLanguage) {
  CompiledArtifact unknown = test::synthetic_language_artifact(Language::triton);
  unknown.language = static_cast<Language>(7);
  const DecodedEntry read = sealed_and_read(unknown);
  EXPECT_EQ(read.problem, EntryProblem::malformed) << read.detail;
  EXPECT_NE(read.detail.find("it records language 7, which zerojit does not know"),
            std::string::npos)
      << read.detail;
}

TEST(EntryRecords, VerifyExitsFourNamingEachDamagedEntryAndTheProblem) {
  test::TempDir dir;
  const fs::path root = dir / "cache";
  std::vector<std::string> damaged_names;
  {
    DiskCache cache(DiskCacheOptions{.root = root});
    cache.publish(test::synthetic_language_artifact(Language::triton, 0));  // sound
    int variant = 1;
    for (const Damage& damage : triton_damages()) {
      CompiledArtifact damaged = test::synthetic_language_artifact(Language::triton, variant++);
      damage.apply(damaged);
      cache.publish(damaged);
      damaged_names.push_back(damaged.identity.hex() + ".zjc");
    }
  }
  const test::ToolRun verify =
      test::run_tool({"cache", "verify", "--cache-dir", root.string(), "--json"}, dir.path());
  EXPECT_EQ(verify.exit_code, 4) << verify.out << verify.err;
  const test::json bad = test::json::parse(verify.out)["result"]["bad"];
  ASSERT_EQ(bad.size(), damaged_names.size()) << verify.out;
  for (const auto& entry : bad) {
    EXPECT_EQ(entry["status"], "malformed-record") << entry.dump();
    const std::string path = entry["path"];
    bool named = false;
    for (const std::string& name : damaged_names) named = named || path.ends_with(name);
    EXPECT_TRUE(named) << path;
  }
  const test::ToolRun text =
      test::run_tool({"cache", "verify", "--cache-dir", root.string()}, dir.path());
  EXPECT_NE(text.out.find("malformed-record"), std::string::npos) << text.out;

  // `ls --long` shows what the sound entry's record fixes, decoded by its kind.
  const test::ToolRun listed =
      test::run_tool({"cache", "ls", "--long", "--cache-dir", root.string()}, dir.path());
  EXPECT_NE(listed.out.find("triton, triton-3.6.0+ptxas-12.8.93: block 128, shared 0 B, PDL, "
                            "params *fp32 *fp32 i32 fp32 + 2 scratch"),
            std::string::npos)
      << listed.out;
}

class EntryRecordsServed : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    compiler = std::make_shared<testing::FakeTritonCompiler>("triton-3.6.0+ptxas-12.8.93");
    Runtime::instance().set_language_compiler(Language::triton, compiler);
  }
  void TearDown() override {
    Runtime::instance().set_language_compiler(Language::triton, nullptr);
    Runtime::instance().set_artifact_store(nullptr);
    CoreTest::TearDown();
  }
  std::shared_ptr<testing::FakeTritonCompiler> compiler;
};

// Three keys on disk, the middle one's record damaged (its entry sealed again): a warmup from
// that disk, or from it as a read-only layer (a pack), compiles exactly that key again, and no
// load ever sees the damaged record.
TEST_F(EntryRecordsServed, AWarmupCompilesExactlyTheDamagedKeysAndLoadsNoDamagedRecord) {
  test::TempDir dir;
  const fs::path root = dir / "cache";
  testing::FakeTritonKernel kernel;
  const int blocks[] = {64, 128, 256};
  Runtime::instance().set_artifact_store(
      std::make_shared<DiskCache>(DiskCacheOptions{.root = root}));
  for (const int block : blocks) kernel.compile({block}, "sm_90a");
  ASSERT_EQ(compiler->compiles, 3);
  const ProgramIdentity victim = kernel.compile({128}, "sm_90a")->identity;
  const fs::path victim_file = root / "entries" / (victim.hex() + ".zjc");
  DecodedEntry stored = decode_entry(test::as_bytes(test::read_file(victim_file)), &victim);
  ASSERT_TRUE(stored.ok());
  replace_in_record(*stored.artifact, R"("block_threads":128)", R"("block_threads":1073741824)");
  const std::string damaged_record = stored.artifact->launch_record;

  for (const bool as_layer : {false, true}) {
    test::write_file(victim_file, encode_entry(*stored.artifact));
    DiskCacheOptions options{.root = as_layer ? dir / "empty" : root};
    if (as_layer) options.read_only_layers = {root};
    Runtime::instance().set_artifact_store(std::make_shared<DiskCache>(options));
    kernel.reset_for_testing();
    backend->loaded_records.clear();
    const int before = compiler->compiles;
    const int devices[] = {0};
    std::vector<ArtifactOrigin> origins;
    for (const int block : blocks)
      origins.push_back(kernel.warm({block}, "sm_90a", devices).origin);
    EXPECT_EQ(origins, (std::vector<ArtifactOrigin>{ArtifactOrigin::disk, ArtifactOrigin::compiled,
                                                    ArtifactOrigin::disk}))
        << (as_layer ? "as a layer" : "as the root");
    EXPECT_EQ(compiler->compiles, before + 1);
    ASSERT_EQ(backend->loaded_records.size(), 3u);
    for (const std::string& record : backend->loaded_records) EXPECT_NE(record, damaged_record);
  }
}

}  // namespace
}  // namespace zerojit

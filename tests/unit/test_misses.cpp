// Learned misses (misses.hpp): every runtime miss appended to one file by many processes at once,
// read back per (kernel, key) with its count and times; damaged lines and lines of another
// format version skipped and named; a file that cannot be written costs one warning.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "zerojit/zerojit.hpp"

namespace zerojit::testing {
namespace {

namespace fs = std::filesystem;

class Misses : public ::testing::Test {
 protected:
  void SetUp() override {
    folder = fs::temp_directory_path() /
             ("zerojit-misses-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder);
    fs::create_directories(folder);
    path = (folder / "misses.jsonl").string();
    set_misses_file(path);
  }
  void TearDown() override {
    set_misses_file(std::nullopt);
    fs::remove_all(folder);
  }
  fs::path folder;
  std::string path;
};

TEST_F(Misses, AMissIsRecordedOncePerProcessWithItsKeyAndDescriptors) {
  record_miss("k.one", "block=128", R"({"block":128})", "x: f32[384]");
  record_miss("k.one", "block=128", R"({"block":128})", "x: f32[384]");
  record_miss("k.two", "dtype=bf16", R"({"dtype":"bf16"})", "");
  const MissesFile file = read_misses(path);
  ASSERT_EQ(file.misses.size(), 2u);
  EXPECT_TRUE(file.skipped.empty());
  EXPECT_EQ(file.misses[0].kernel, "k.one");
  EXPECT_EQ(file.misses[0].key_text, "block=128");
  EXPECT_EQ(file.misses[0].key_json, R"({"block":128})");
  EXPECT_EQ(file.misses[0].descriptors, "x: f32[384]");
  EXPECT_EQ(file.misses[0].count, 1u);
  EXPECT_GT(file.misses[0].first_seen, 1700000000);
  EXPECT_EQ(file.misses[1].kernel, "k.two");
}

TEST_F(Misses, EightProcessesAppendingAtOnceLoseNoLine) {
  constexpr int kProcesses = 8;
  constexpr int kKeys = 200;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      set_misses_file(path);  // a fresh record of what this process has written
      // Long descriptors: lines of kilobytes, which interleave if written in pieces.
      const std::string descriptors(3000, static_cast<char>('a' + p));
      for (int k = 0; k < kKeys; ++k) {
        record_miss("k.shared", "n=" + std::to_string(k), "{\"n\":" + std::to_string(k) + "}",
                    descriptors);
      }
      ::_exit(0);
    }
    children.push_back(child);
  }
  for (const pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const MissesFile file = read_misses(path);
  EXPECT_TRUE(file.skipped.empty()) << file.skipped.front();
  ASSERT_EQ(file.misses.size(), static_cast<std::size_t>(kKeys));
  for (const auto& miss : file.misses) {
    EXPECT_EQ(miss.count, static_cast<std::uint64_t>(kProcesses)) << miss.key_text;
  }
}

TEST_F(Misses, DamagedLinesAndOtherVersionsAreSkippedAndNamedTheRestIsKept) {
  record_miss("k.one", "block=128", R"({"block":128})", "");
  {
    std::ofstream out(path, std::ios::app);
    out << "{\"zerojit_miss\":1,\"kernel\":\"k.one\",\"key\":\"blo\n";   // line 2: cut
    out << "{\"zerojit_miss\":2,\"kernel\":\"k.one\",\"key\":\"x\"}\n";  // line 3
    out << "{\"zerojit_miss\":1,\"kernel\":\"k.one\",\"key\":\"b\",\"key_json\":1,"
           "\"time\":1}\n";                  // line 4
    out << std::string(70000, 'x') << "\n";  // line 5
  }
  set_misses_file(path);  // the process records again, as a new one would
  record_miss("k.two", "block=64", R"({"block":64})", "");
  const MissesFile file = read_misses(path);
  ASSERT_EQ(file.misses.size(), 2u);
  EXPECT_EQ(file.misses[1].key_text, "block=64");
  ASSERT_EQ(file.skipped.size(), 4u);
  EXPECT_EQ(file.skipped[0].rfind("line 2: not a JSON object", 0), 0u) << file.skipped[0];
  EXPECT_EQ(file.skipped[1].rfind("line 3: of another format version (2", 0), 0u);
  EXPECT_EQ(file.skipped[2].rfind("line 4: ", 0), 0u);
  EXPECT_EQ(file.skipped[3].rfind("line 5: longer than any line", 0), 0u);
}

TEST_F(Misses, AFileThatCannotBeWrittenCostsOneWarningAndNothingElse) {
  std::vector<std::string> warnings;
  set_log_handler([&warnings](const LogRecord& record) { warnings.emplace_back(record.message); });
  set_misses_file((folder / "no-such-folder" / "misses.jsonl").string());
  record_miss("k.one", "block=128", R"({"block":128})", "");
  record_miss("k.one", "block=64", R"({"block":64})", "");
  set_log_handler(nullptr);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("cannot record a runtime miss of k.one [block=128]"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("serving goes on"), std::string::npos);
  if (fs::exists("/dev/full")) {  // a full disk: the write fails, the warning says so
    warnings.clear();
    set_log_handler(
        [&warnings](const LogRecord& record) { warnings.emplace_back(record.message); });
    set_misses_file("/dev/full");
    record_miss("k.one", "block=32", R"({"block":32})", "");
    set_log_handler(nullptr);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("No space left"), std::string::npos) << warnings[0];
  }
}

TEST_F(Misses, AFileThatCannotBeReadIsAnErrorNamingIt) {
  try {
    (void)read_misses((folder / "absent.jsonl").string());
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("absent.jsonl"), std::string::npos);
  }
}

}  // namespace
}  // namespace zerojit::testing

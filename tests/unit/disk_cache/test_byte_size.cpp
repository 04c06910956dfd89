// The one size parser (include/zerojit/bytes.hpp): its forms, its boundaries at 2^64, and its
// use for ZEROJIT_CACHE_MAX_BYTES and `zerojit cache gc --max-size`, where a size that
// overflowed used to wrap around to a tiny quota and delete every entry.
#include <cstdlib>
#include <limits>

#include "unit/disk_cache/support.hpp"
#include "zerojit/bytes.hpp"
#include "zerojit/error.hpp"

namespace zerojit::test {
namespace {

constexpr std::uint64_t kKiB = std::uint64_t{1} << 10;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

TEST(ByteSize, AcceptsNumbersWithBinaryUnitsInAnyCase) {
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("1073741824"), kGiB);
  EXPECT_EQ(parse_byte_size("512B"), 512u);
  EXPECT_EQ(parse_byte_size("512m"), 512 * (kKiB * kKiB));
  EXPECT_EQ(parse_byte_size("512M"), 512 * (kKiB * kKiB));
  EXPECT_EQ(parse_byte_size("512MiB"), 512 * (kKiB * kKiB));
  EXPECT_EQ(parse_byte_size("512mib"), 512 * (kKiB * kKiB));
  EXPECT_EQ(parse_byte_size("1G"), kGiB);
  EXPECT_EQ(parse_byte_size("1.5GiB"), kGiB + kGiB / 2);
  EXPECT_EQ(parse_byte_size("2k"), 2 * kKiB);
  EXPECT_EQ(parse_byte_size("3T"), 3 * kGiB * kKiB);
  EXPECT_EQ(parse_byte_size("1P"), kGiB * kKiB * kKiB);
  EXPECT_EQ(parse_byte_size("0.001K"), 1u) << "rounded down to whole bytes";
  EXPECT_EQ(parse_byte_size("0.0001K"), 0u);
}

TEST(ByteSize, TheLargestSizeIsTwoToTheSixtyFourMinusOne) {
  EXPECT_EQ(parse_byte_size("18446744073709551615"), kMax);
  EXPECT_EQ(parse_byte_size("15E"), 15 * (kMax / 16 + 1));
  EXPECT_EQ(parse_byte_size("17179869183G"), 17179869183 * kGiB);
  // (16 - 10^-19) * 2^60 is 2^64 - 0.115...: computed exactly, it rounds down to the largest.
  EXPECT_EQ(parse_byte_size("15.9999999999999999999E"), kMax);
  std::string problem;
  for (const char* over : {"18446744073709551616", "99999999999999999999999", "16E", "16EiB",
                           "17179869184G", "17592186044416M", "16777216T", "16384P",
                           "18014398509481984K", "15.99999999999999999999E"}) {
    problem.clear();
    EXPECT_EQ(parse_byte_size(over, &problem), std::nullopt) << over;
    EXPECT_FALSE(problem.empty()) << over;
  }
  problem.clear();
  EXPECT_EQ(parse_byte_size("17179869184G", &problem), std::nullopt);
  EXPECT_EQ(problem, "it is more than 2^64 - 1 bytes");
  EXPECT_EQ(parse_byte_size("17592186044415M"), 17592186044415 * kKiB * kKiB)
      << "the largest whole number of MiB below 2^64";
}

TEST(ByteSize, RefusesEmptyNegativeAmbiguousAndGarbage) {
  for (const char* bad :
       {"",    "-1",  "-0",  "+1", " 1",  "1 ",    "1 G", "lots", "G",     "1X",
        "1GB", "1kb", "1.5", "1.", ".5G", "1..5G", "1e9", "0x10", "1GiBs", "1G1"}) {
    std::string problem;
    EXPECT_EQ(parse_byte_size(bad, &problem), std::nullopt) << '"' << bad << '"';
    EXPECT_FALSE(problem.empty()) << '"' << bad << '"';
  }
  std::string problem;
  parse_byte_size("1GB", &problem);
  EXPECT_NE(problem.find("write G or GiB"), std::string::npos) << problem;
  parse_byte_size("-5M", &problem);
  EXPECT_EQ(problem, "a size cannot be negative");
  try {
    parse_byte_size_or_throw("17179869184G", "--max-size");
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("--max-size \"17179869184G\" is not a size in bytes"), std::string::npos)
        << message;
    EXPECT_NE(message.find("more than 2^64 - 1 bytes"), std::string::npos) << message;
  }
}

TEST(ByteSize, TheQuotaVariableUsesTheSameParser) {
  ::setenv("ZEROJIT_CACHE_MAX_BYTES", "1.5G", 1);
  EXPECT_EQ(default_disk_cache_options().max_bytes, kGiB + kGiB / 2);
  ::setenv("ZEROJIT_CACHE_MAX_BYTES", "512m", 1);
  EXPECT_EQ(default_disk_cache_options().max_bytes, 512 * kKiB * kKiB);
  ::setenv("ZEROJIT_CACHE_MAX_BYTES", "17592186044417M", 1);
  try {
    default_disk_cache_options();
    ADD_FAILURE() << "an overflowing quota was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("ZEROJIT_CACHE_MAX_BYTES"), std::string::npos)
        << error.what();
  }
  ::unsetenv("ZEROJIT_CACHE_MAX_BYTES");
}

TEST_F(DiskCacheStore, AnOverflowingMaxSizeIsRefusedAndDeletesNothing) {
  const fs::path root = dir / "cache";
  {
    DiskCache cache(options(root));
    for (int i = 0; i < 3; ++i) cache.publish(synthetic_artifact(10 + i));
  }
  ASSERT_EQ(entry_files(root).size(), 3u);
  // Each of these used to wrap around: to a quota of 0 (every entry deleted) or of 1 MiB.
  for (const char* size : {"17179869184G", "17592186044417M", "18446744073709551616", "-1"}) {
    const ToolRun gc =
        run_tool({"cache", "gc", "--cache-dir", root.string(), "--max-size", size}, dir.path());
    EXPECT_EQ(gc.exit_code, 2) << size << ": " << gc.out << gc.err;
    EXPECT_NE(gc.err.find("--max-size"), std::string::npos) << gc.err;
    EXPECT_EQ(entry_files(root).size(), 3u) << size;
  }
  const ToolRun largest = run_tool(
      {"cache", "gc", "--cache-dir", root.string(), "--max-size", "18446744073709551615", "--json"},
      dir.path());
  ASSERT_EQ(largest.exit_code, 0) << largest.err;
  EXPECT_EQ(json::parse(largest.out)["result"]["quota_bytes"].get<std::uint64_t>(), kMax);
  EXPECT_EQ(entry_files(root).size(), 3u);
  EXPECT_TRUE(warnings.empty());
}

}  // namespace
}  // namespace zerojit::test

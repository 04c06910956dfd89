// The entry format: every field round-trips, and every kind of damage is detected and told
// apart (no files, no processes).
#include "unit/disk_cache/support.hpp"

namespace zerojit::test {
namespace {

TEST(CacheEntry, RoundTripsEveryField) {
  const CompiledArtifact artifact = synthetic_artifact(64, 4000);
  const std::string bytes = encode_entry(artifact);
  const DecodedEntry decoded = decode_entry(as_bytes(bytes), &artifact.identity);
  ASSERT_TRUE(decoded.ok()) << decoded.detail;
  const CompiledArtifact& back = *decoded.artifact;
  EXPECT_EQ(back.identity, artifact.identity);
  EXPECT_EQ(back.components, artifact.components);
  EXPECT_EQ(back.kernel_name, artifact.kernel_name);
  EXPECT_EQ(back.key_text, artifact.key_text);
  EXPECT_EQ(back.arch, artifact.arch);
  EXPECT_EQ(back.compiler_version, artifact.compiler_version);
  EXPECT_EQ(back.cubin, artifact.cubin);
  EXPECT_EQ(back.log, artifact.log);
  EXPECT_EQ(back.compile_seconds, artifact.compile_seconds);
  ASSERT_EQ(back.lowered_names.size(), 1u);
  EXPECT_EQ(back.lowered_names[0].lowered, artifact.lowered_names[0].lowered);
  EXPECT_EQ(decoded.format_version, static_cast<std::uint32_t>(kFormatVersion));
  EXPECT_TRUE(bytes.starts_with(kCacheEntryMagic));
}

TEST(CacheEntry, EveryDamageClassIsToldApart) {
  const CompiledArtifact artifact = synthetic_artifact(32, 300);
  const std::string good = encode_entry(artifact);
  auto problem = [&](const std::string& bytes) {
    return decode_entry(as_bytes(bytes), &artifact.identity).problem;
  };
  EXPECT_EQ(problem(""), EntryProblem::empty);
  EXPECT_EQ(problem("\x7f"
                    "ELF\x02\x01\x01 a cubin, not an entry"),
            EntryProblem::foreign);
  EXPECT_EQ(problem("\x89ZJ"), EntryProblem::foreign);
  EXPECT_EQ(problem(good.substr(0, good.size() / 2)), EntryProblem::truncated);
  EXPECT_EQ(problem(good.substr(0, 12)), EntryProblem::truncated);
  EXPECT_EQ(problem(good + "x"), EntryProblem::overlong);
  std::string other_layout = good;
  other_layout[8] = 7;
  EXPECT_EQ(problem(other_layout), EntryProblem::unsupported_layout);
  const CompiledArtifact other_key = synthetic_artifact(64, 300);
  EXPECT_EQ(problem(encode_entry(other_key)), EntryProblem::identity_mismatch);
  const CompiledArtifact other_arch = synthetic_artifact(32, 300, "sm_100a");
  const DecodedEntry misnamed =
      decode_entry(as_bytes(encode_entry(other_arch)), &artifact.identity);
  EXPECT_EQ(misnamed.problem, EntryProblem::identity_mismatch);
  EXPECT_NE(misnamed.detail.find("sm_100a"), std::string::npos) << misnamed.detail;
  // An entry whose identity was edited along with a recomputed checksum still fails: its
  // identity no longer agrees with its components.
  CompiledArtifact forged = artifact;
  forged.identity.words[0] ^= 1;
  EXPECT_EQ(decode_entry(as_bytes(encode_entry(forged)), nullptr).problem, EntryProblem::malformed);
}

TEST(CacheEntry, EverySingleByteFlipAndEveryTruncationIsDetected) {
  const CompiledArtifact artifact = synthetic_artifact(32, 200);
  const std::string good = encode_entry(artifact);
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (const unsigned mask : {0x01u, 0x80u, 0xffu}) {
      std::string bad = good;
      bad[i] = static_cast<char>(static_cast<unsigned char>(bad[i]) ^ mask);
      EXPECT_FALSE(decode_entry(as_bytes(bad), &artifact.identity).ok())
          << "byte " << i << " ^ " << mask;
      EXPECT_FALSE(decode_entry(as_bytes(bad), nullptr).ok()) << "byte " << i;
    }
  }
  for (std::size_t size = 0; size < good.size(); ++size) {
    EXPECT_FALSE(decode_entry(as_bytes(good.substr(0, size)), nullptr).ok()) << size << " bytes";
  }
}

}  // namespace
}  // namespace zerojit::test

// libFuzzer target for the disk cache's entry reader (src/cache_entry.cpp): arbitrary bytes
// must never crash it, read out of bounds or hit undefined behaviour, and whatever it accepts
// must re-encode to the very same bytes. Built with -fsanitize=fuzzer,address,undefined by
// tests/fuzz/run_fuzzer.sh, which runs it from a corpus of valid entries.
//
// A mutated entry almost never keeps a valid checksum, which would leave the field parser
// behind the checksum unexplored; so each input is also decoded a second time with its
// recorded length and its checksum repaired.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "zerojit/cache_entry.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace {

constexpr std::size_t kLengthOffset = 16;
constexpr std::size_t kIdentityOffset = 24;
constexpr std::size_t kHeaderBytes = 40;
constexpr std::size_t kChecksumBytes = 16;

void put_u64(unsigned char* out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

std::uint64_t get_u64(const unsigned char* in) {
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return value;
}

void check(const unsigned char* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const zerojit::DecodedEntry decoded = zerojit::decode_entry(bytes);
  // Without an expected identity, an artifact comes only with success.
  if (!decoded.ok() && decoded.artifact) std::abort();
  if (decoded.ok()) {
    if (!decoded.artifact) std::abort();
    if (decoded.format_version == static_cast<std::uint32_t>(zerojit::kFormatVersion)) {
      const std::string again = zerojit::encode_entry(*decoded.artifact);
      if (again.size() != size || std::memcmp(again.data(), data, size) != 0) std::abort();
    }
    // Expected to be itself: accepted; expected to be anything else: refused.
    if (!zerojit::decode_entry(bytes, &decoded.artifact->identity).ok()) std::abort();
    zerojit::ProgramIdentity other = decoded.artifact->identity;
    other.words[1] ^= 1;
    if (zerojit::decode_entry(bytes, &other).problem != zerojit::EntryProblem::identity_mismatch) {
      std::abort();
    }
  }
  if (size >= kHeaderBytes) {
    zerojit::ProgramIdentity named;
    named.words[0] = get_u64(data + kIdentityOffset);
    named.words[1] = get_u64(data + kIdentityOffset + 8) ^ (size & 1);
    (void)zerojit::decode_entry(bytes, &named);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check(data, size);
  if (size >= kHeaderBytes + kChecksumBytes) {
    std::string repaired(reinterpret_cast<const char*>(data), size);
    auto* bytes = reinterpret_cast<unsigned char*>(repaired.data());
    put_u64(bytes + kLengthOffset, size);
    const XXH128_hash_t sum = XXH3_128bits(bytes, size - kChecksumBytes);
    put_u64(bytes + size - kChecksumBytes, sum.high64);
    put_u64(bytes + size - kChecksumBytes + 8, sum.low64);
    check(bytes, size);
  }
  return 0;
}

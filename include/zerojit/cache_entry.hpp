// The on-disk form of one compiled artifact: a self-describing, checksummed entry of the disk
// cache. Encoding and decoding are pure functions over bytes, so the reader can be fuzzed on
// its own (tests/fuzz/fuzz_cache_entry.cpp). docs/CACHE.md describes the layout byte by byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "zerojit/compiler.hpp"
#include "zerojit/program.hpp"

namespace zerojit {

// Version of the entry layout written (docs/CACHE.md). Layout 2 added the language (the entry
// kind) and the launch record, layout 3 the compile request and program options a record is
// checked against; layout 1 and 2 entries of CUDA C++ are still read (another kind's entry of
// layout 2 is compiled again). A reader refuses a layout it does not know.
inline constexpr std::uint32_t kCacheEntryLayoutVersion = 3;
inline constexpr std::uint32_t kOldestCacheEntryLayoutVersion = 1;
// Every entry starts with these 8 bytes. The high first byte catches text-mode mangling.
inline constexpr std::string_view kCacheEntryMagic{"\x89ZJCACHE", 8};
// A decoded entry is never larger than this: a bigger file is rejected before it is read.
inline constexpr std::uint64_t kMaxCacheEntryBytes = std::uint64_t{1} << 30;

// Why an entry cannot be used. Each damage class of a file is told apart, so that the warning
// says what happened to it.
enum class EntryProblem {
  none,
  empty,               // zero bytes
  foreign,             // does not start with the entry magic: not a zerojit cache entry
  unsupported_layout,  // a zerojit entry of a layout version this reader does not know
  truncated,           // shorter than the length its header records
  overlong,            // longer than the length its header records
  checksum_mismatch,   // a byte changed after it was written
  malformed,           // the checksum holds but the fields do not parse or do not agree
  malformed_record,    // its launch record is unsound or disagrees with its compile request
  identity_mismatch,   // a sound entry, but of another identity (another key, arch, ...)
  not_regular_file,    // a symbolic link, directory, device or pipe where an entry should be
  too_large,           // over kMaxCacheEntryBytes
  unreadable,          // an I/O error while reading it
};
std::string_view to_string(EntryProblem problem);

// What decoding found: the artifact, or the problem and a sentence about it.
struct DecodedEntry {
  EntryProblem problem = EntryProblem::none;
  std::string detail;  // e.g. "it holds examples.empty [block_threads=64] for sm_100a ..."
  // Set when the entry is sound, including an identity_mismatch (so a listing can say what a
  // misnamed entry holds); never load it unless ok().
  std::optional<CompiledArtifact> artifact;
  std::uint32_t format_version = 0;  // zerojit's format version recorded in the header

  bool ok() const { return problem == EntryProblem::none; }
};

// The bytes of an entry's fixed header: magic, layout, format version, total length, identity.
inline constexpr std::size_t kCacheEntryHeaderBytes = 8 + 4 + 4 + 8 + 16;

// The damage a file's first bytes already show (empty, foreign, a layout this reader does not
// know, a recorded length other than the file's size): lets eviction and listings tell a
// damaged file from an entry without reading it whole. `first_bytes` holds up to
// kCacheEntryHeaderBytes. ok() when the header is sound (the body is still to be verified).
DecodedEntry check_entry_header(std::span<const std::byte> first_bytes, std::uint64_t file_size);

// The entry bytes of an artifact: header, fields, XXH3-128 checksum of everything before it.
std::string encode_entry(const CompiledArtifact& artifact);

// Decodes and verifies entry bytes: magic, layout, length, checksum, every field in bounds,
// identity agreeing with its components, the launch record whole and agreeing with the compile
// request (EntryKind::check_record), and (when `expected` is given) the identity the caller
// asked for. Never throws on bad input and never reads outside `bytes`.
DecodedEntry decode_entry(std::span<const std::byte> bytes,
                          const ProgramIdentity* expected = nullptr);

}  // namespace zerojit

#include "zerojit/cache_entry.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace zerojit {
namespace {

constexpr std::size_t kHeaderBytes = kCacheEntryHeaderBytes;
constexpr std::size_t kChecksumBytes = 16;
// Text fields (names, key, arch, log) stay far below this; a bigger one is a damaged entry.
constexpr std::uint32_t kMaxTextBytes = 16u << 20;
constexpr std::uint32_t kMaxLoweredNames = 4096;
constexpr std::uint32_t kMaxOptions = 4096;

// Entries are little-endian on every host, so a cache moved between machines stays readable.
void put_u32(std::string& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
void put_text(std::string& out, std::string_view text) {
  put_u32(out, static_cast<std::uint32_t>(text.size()));
  out.append(text);
}

XXH128_hash_t checksum_of(const void* data, std::size_t size) { return XXH3_128bits(data, size); }

// A bounds-checked cursor: every read either fits in the remaining bytes or fails, and a
// failed reader stays failed.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}

  bool failed() const { return failed_; }
  std::size_t position() const { return position_; }

  std::uint32_t u32() { return static_cast<std::uint32_t>(little_endian(4)); }
  std::uint64_t u64() { return little_endian(8); }

  std::string text(std::uint32_t limit) {
    const std::uint32_t size = u32();
    if (failed_ || size > limit || size > bytes_.size() - position_) {
      failed_ = true;
      return {};
    }
    std::string out(reinterpret_cast<const char*>(bytes_.data() + position_), size);
    position_ += size;
    return out;
  }

 private:
  std::uint64_t little_endian(std::size_t width) {
    if (failed_ || width > bytes_.size() - position_) {
      failed_ = true;
      return 0;
    }
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < width; ++i) {
      value |= static_cast<std::uint64_t>(std::to_integer<unsigned>(bytes_[position_ + i]))
               << (8 * i);
    }
    position_ += width;
    return value;
  }

  std::span<const std::byte> bytes_;
  std::size_t position_ = 0;
  bool failed_ = false;
};

DecodedEntry problem(EntryProblem kind, std::string detail) {
  DecodedEntry entry;
  entry.problem = kind;
  entry.detail = std::move(detail);
  return entry;
}

// The entry's launch record, decoded whole by its kind and checked against the compile request
// its identity was made from: a record that does not match is never served, whatever tier it
// came from.
DecodedEntry check_launch_record(const CompiledArtifact& artifact, std::uint32_t layout) {
  const EntryKind& kind = entry_kind(artifact.language);
  if (!kind.compiled_by_nvrtc) {
    if (layout < 3) {
      return problem(EntryProblem::unsupported_layout,
                     "a " + std::string(kind.name) + " entry of layout " + std::to_string(layout) +
                         ", written before launch records were checked against their compile "
                         "requests");
    }
    if (language_options_component(kind, artifact.compile_request, artifact.program_options) !=
        artifact.components.options) {
      return problem(EntryProblem::malformed_record,
                     "its compile request is not the one its identity was made from");
    }
  }
  std::string why;
  try {
    why = kind.check_record(artifact);
  } catch (const std::exception& error) {  // decode_entry never throws on bad input
    why = std::string("its launch record cannot be read: ") + error.what();
  }
  if (!why.empty()) return problem(EntryProblem::malformed_record, std::move(why));
  return {};
}

}  // namespace

std::string_view to_string(EntryProblem problem) {
  switch (problem) {
    case EntryProblem::none:
      return "ok";
    case EntryProblem::empty:
      return "empty";
    case EntryProblem::foreign:
      return "foreign";
    case EntryProblem::unsupported_layout:
      return "unsupported-layout";
    case EntryProblem::truncated:
      return "truncated";
    case EntryProblem::overlong:
      return "overlong";
    case EntryProblem::checksum_mismatch:
      return "checksum-mismatch";
    case EntryProblem::malformed:
      return "malformed";
    case EntryProblem::malformed_record:
      return "malformed-record";
    case EntryProblem::identity_mismatch:
      return "identity-mismatch";
    case EntryProblem::not_regular_file:
      return "not-a-regular-file";
    case EntryProblem::too_large:
      return "too-large";
    case EntryProblem::unreadable:
      return "unreadable";
  }
  return "?";
}

std::string encode_entry(const CompiledArtifact& artifact) {
  std::string out;
  out.reserve(kHeaderBytes + 256 + artifact.cubin.size() + artifact.log.size() +
              artifact.launch_record.size() + kChecksumBytes);
  out.append(kCacheEntryMagic);
  put_u32(out, kCacheEntryLayoutVersion);
  put_u32(out, static_cast<std::uint32_t>(kFormatVersion));
  const std::size_t length_offset = out.size();
  put_u64(out, 0);  // the total length, patched below
  put_u64(out, artifact.identity.words[0]);
  put_u64(out, artifact.identity.words[1]);

  const IdentityComponents& c = artifact.components;
  for (std::uint64_t word :
       {c.format, c.kernel, c.source, c.names, c.options, c.key, c.arch, c.compiler}) {
    put_u64(out, word);
  }
  put_text(out, artifact.kernel_name);
  put_text(out, artifact.key_text);
  put_text(out, artifact.arch);
  put_text(out, artifact.compiler_version);
  put_u64(out, std::bit_cast<std::uint64_t>(artifact.compile_seconds));
  put_text(out, artifact.log);
  put_u32(out, static_cast<std::uint32_t>(artifact.lowered_names.size()));
  for (const LoweredName& name : artifact.lowered_names) {
    put_text(out, name.expression);
    put_text(out, name.lowered);
  }
  put_u32(out, static_cast<std::uint32_t>(artifact.language));  // layout 2
  put_text(out, artifact.launch_record);                        // layout 2
  put_text(out, artifact.compile_request);                      // layout 3
  put_u32(out, static_cast<std::uint32_t>(artifact.program_options.size()));
  for (const std::string& option : artifact.program_options) put_text(out, option);
  put_text(out, artifact.cubin);

  const std::uint64_t total = out.size() + kChecksumBytes;
  for (std::size_t i = 0; i < 8; ++i) {
    out[length_offset + i] = static_cast<char>((total >> (8 * i)) & 0xff);
  }
  const XXH128_hash_t checksum = checksum_of(out.data(), out.size());
  put_u64(out, checksum.high64);
  put_u64(out, checksum.low64);
  return out;
}

DecodedEntry check_entry_header(std::span<const std::byte> first_bytes, std::uint64_t file_size) {
  if (file_size == 0) return problem(EntryProblem::empty, "the file is empty");
  if (first_bytes.size() < kCacheEntryMagic.size() ||
      std::memcmp(first_bytes.data(), kCacheEntryMagic.data(), kCacheEntryMagic.size()) != 0) {
    return problem(EntryProblem::foreign, "it does not start with a zerojit cache entry header");
  }
  if (file_size > kMaxCacheEntryBytes) {
    return problem(EntryProblem::too_large, "it is larger than any entry zerojit writes");
  }
  Reader header(first_bytes.subspan(kCacheEntryMagic.size()));
  const std::uint32_t layout = header.u32();
  if (header.failed()) return problem(EntryProblem::truncated, "it ends inside its header");
  if (layout < kOldestCacheEntryLayoutVersion || layout > kCacheEntryLayoutVersion) {
    return problem(EntryProblem::unsupported_layout,
                   "entry layout " + std::to_string(layout) + ", this zerojit reads layouts " +
                       std::to_string(kOldestCacheEntryLayoutVersion) + " to " +
                       std::to_string(kCacheEntryLayoutVersion));
  }
  header.u32();  // zerojit's format version
  const std::uint64_t total = header.u64();
  header.u64();  // the identity
  header.u64();
  if (header.failed()) return problem(EntryProblem::truncated, "it ends inside its header");
  if (file_size < total) {
    return problem(EntryProblem::truncated, std::to_string(file_size) + " bytes of the " +
                                                std::to_string(total) + " its header records");
  }
  if (file_size > total) {
    return problem(EntryProblem::overlong, std::to_string(file_size) + " bytes, " +
                                               std::to_string(total) + " recorded in its header");
  }
  return {};
}

DecodedEntry decode_entry(std::span<const std::byte> bytes, const ProgramIdentity* expected) {
  DecodedEntry damaged =
      check_entry_header(bytes.first(std::min(bytes.size(), kHeaderBytes)), bytes.size());
  if (!damaged.ok()) return damaged;
  Reader header(bytes.subspan(kCacheEntryMagic.size()));  // whole: checked above
  const std::uint32_t layout = header.u32();
  const std::uint32_t format_version = header.u32();
  const std::uint64_t total = header.u64();
  ProgramIdentity stored;
  stored.words[0] = header.u64();
  stored.words[1] = header.u64();
  if (total < kHeaderBytes + kChecksumBytes) {
    return problem(EntryProblem::malformed, "its recorded length is shorter than a header");
  }

  const std::size_t body_end = bytes.size() - kChecksumBytes;
  Reader trailer(bytes.subspan(body_end));
  const std::uint64_t high = trailer.u64();
  const std::uint64_t low = trailer.u64();
  const XXH128_hash_t checksum = checksum_of(bytes.data(), body_end);
  if (checksum.high64 != high || checksum.low64 != low) {
    return problem(EntryProblem::checksum_mismatch,
                   "its checksum does not match its content (a byte changed after writing)");
  }

  Reader body(bytes.subspan(kHeaderBytes, body_end - kHeaderBytes));
  CompiledArtifact artifact;
  artifact.identity = stored;
  IdentityComponents& c = artifact.components;
  for (std::uint64_t* word :
       {&c.format, &c.kernel, &c.source, &c.names, &c.options, &c.key, &c.arch, &c.compiler}) {
    *word = body.u64();
  }
  artifact.kernel_name = body.text(kMaxTextBytes);
  artifact.key_text = body.text(kMaxTextBytes);
  artifact.arch = body.text(kMaxTextBytes);
  artifact.compiler_version = body.text(kMaxTextBytes);
  artifact.compile_seconds = std::bit_cast<double>(body.u64());
  artifact.log = body.text(kMaxTextBytes);
  const std::uint32_t name_count = body.u32();
  if (!body.failed() && name_count > kMaxLoweredNames) {
    return problem(EntryProblem::malformed,
                   "it records " + std::to_string(name_count) + " kernel names");
  }
  for (std::uint32_t i = 0; i < name_count && !body.failed(); ++i) {
    LoweredName name;
    name.expression = body.text(kMaxTextBytes);
    name.lowered = body.text(kMaxTextBytes);
    artifact.lowered_names.push_back(std::move(name));
  }
  if (layout >= 2) {
    const std::uint32_t language = body.u32();
    if (!body.failed() && find_entry_kind(language) == nullptr) {
      return problem(EntryProblem::malformed, "it records language " + std::to_string(language) +
                                                  ", which zerojit does not know");
    }
    artifact.language = static_cast<Language>(language);
    artifact.launch_record = body.text(kMaxTextBytes);
  }
  if (layout >= 3) {
    artifact.compile_request = body.text(kMaxTextBytes);
    const std::uint32_t option_count = body.u32();
    if (!body.failed() && option_count > kMaxOptions) {
      return problem(EntryProblem::malformed,
                     "it records " + std::to_string(option_count) + " program options");
    }
    for (std::uint32_t i = 0; i < option_count && !body.failed(); ++i) {
      artifact.program_options.push_back(body.text(kMaxTextBytes));
    }
  }
  artifact.cubin = body.text(static_cast<std::uint32_t>(-1));
  if (body.failed()) return problem(EntryProblem::malformed, "a field runs past the entry's end");
  if (body.position() != body_end - kHeaderBytes) {
    return problem(EntryProblem::malformed, "bytes follow its last field");
  }
  if (identity_from_components(artifact.components) != artifact.identity) {
    return problem(EntryProblem::malformed, "its identity does not agree with its components");
  }
  if (DecodedEntry refused = check_launch_record(artifact, layout); !refused.ok()) return refused;

  DecodedEntry decoded;
  decoded.format_version = format_version;
  if (expected != nullptr && *expected != artifact.identity) {
    decoded.problem = EntryProblem::identity_mismatch;
    decoded.detail = "it holds " + artifact.kernel_name + " [" + artifact.key_text + "] for " +
                     artifact.arch + " (identity " + artifact.identity.hex() +
                     "), not the identity its name says";
  }
  decoded.artifact = std::move(artifact);
  return decoded;
}

}  // namespace zerojit

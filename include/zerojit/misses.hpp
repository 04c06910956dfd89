// Learned misses: every runtime miss (a call whose key was not warmed, after warmup) is appended
// to a file, so that the next boot warms it (`zerojit warmup --also FILE`, or the Python
// warmup's `also=`): a missed key is compiled ahead of time from then on. Many processes append
// to one file at once: each miss is one line written by one write(2) of an O_APPEND file, which
// the kernel never interleaves with another process's line. A line that is damaged, or written
// by another version of this format, is skipped and named when the file is read; nothing else of
// the file is lost. A file that cannot be written costs one warning; serving goes on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zerojit {

// The file misses go to: set_misses_file's, else $ZEROJIT_MISSES_FILE; none: not recorded.
void set_misses_file(std::optional<std::string> path);
std::optional<std::string> misses_file();

// Appends one line for a runtime miss of (kernel, key), once per process: the key's text and
// JSON, the runtime descriptors that produced it, the time and the process. Never throws.
void record_miss(const std::string& kernel, const std::string& key_text,
                 const std::string& key_json, const std::string& descriptors) noexcept;

// One (kernel, key) of a misses file, with every line that recorded it folded in.
struct LearnedMiss {
  std::string kernel;
  std::string key_text;
  std::string key_json;         // the key's fields as JSON (its kernel rebuilds the key from them)
  std::string descriptors;      // of the first miss
  std::int64_t first_seen = 0;  // Unix seconds
  std::int64_t last_seen = 0;
  std::uint64_t count = 0;  // lines (one per process that missed it)
};

struct MissesFile {
  std::vector<LearnedMiss> misses;  // in the order their first lines appear
  // "line N: why" for each line skipped (damaged, or of another format version).
  std::vector<std::string> skipped;
};

// Reads a misses file; throws zerojit::Error naming it when it cannot be read at all.
MissesFile read_misses(const std::string& path);

// The format version of a line ("zerojit_miss": 1).
inline constexpr int kMissesFormatVersion = 1;

}  // namespace zerojit

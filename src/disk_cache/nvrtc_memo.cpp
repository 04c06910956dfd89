// The NVRTC version memo (docs/CACHE.md, "NVRTC version memo"): a process whose keys are all
// on disk never loads NVRTC just to name its version. And the records of the compiler versions
// a root's entries were compiled with, by which a process with no compiler at all (a serving
// image with a pack) names the version its identities need.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "disk_cache/impl.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace zerojit {

namespace detail {

namespace {

std::uint64_t xxh64_of(std::string_view text) { return XXH3_64bits(text.data(), text.size()); }

// What NVRTC's version looks like ("13.0"): anything else is never written or believed.
bool plausible_version(std::string_view version) {
  return !version.empty() && version.size() <= 32 &&
         std::all_of(version.begin(), version.end(),
                     [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

// What another compiler's version and an arch look like in a record's name
// ("triton-3.6.0+ptxas-12.8.93", "sm_90a"): letters, digits and ._+- only, so a name never
// leaves its directory or reads as another record.
bool plausible_token(std::string_view token) {
  return !token.empty() && token.size() <= 96 &&
         std::all_of(token.begin(), token.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  c == '.' || c == '_' || c == '+' || c == '-';
         });
}

// The record name of a non-CUDA compiler version: compiled-with-<language>@<arch>@<version>.
// ('@' never appears in an NVRTC version, so the two kinds of record cannot be confused.)
std::string language_record_prefix(Language language, std::string_view arch) {
  return std::string(disk::kVersionRecordPrefix) + std::string(to_string(language)) + "@" +
         std::string(arch) + "@";
}

}  // namespace

std::string DiskCacheImpl::memo_name(std::string_view fingerprint) const {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "%016" PRIx64, xxh64_of(fingerprint));
  return buffer;
}

std::string DiskCacheImpl::memo_text(std::string_view fingerprint, std::string_view version) {
  std::string body = std::string(disk::kMemoHeader) + "\nfingerprint=" + std::string(fingerprint) +
                     "\nversion=" + std::string(version) + "\n";
  char checksum[32];
  std::snprintf(checksum, sizeof checksum, "checksum=%016" PRIx64 "\n", xxh64_of(body));
  return body + checksum;
}

void DiskCacheImpl::record_compiler_version(const CompiledArtifact& artifact) {
  Layer* layer = writable_layer();
  const std::string_view version = artifact.compiler_version;
  std::string name;
  if (entry_kind(artifact.language).compiled_by_nvrtc) {
    if (!plausible_version(version)) return;
    name = std::string(disk::kVersionRecordPrefix) + std::string(version);
  } else {
    if (!plausible_token(version) || !plausible_token(artifact.arch)) return;
    name = language_record_prefix(artifact.language, artifact.arch) + std::string(version);
  }
  if (layer == nullptr) return;
  {
    std::lock_guard lock(recorded_mutex);
    if (!recorded.insert(name).second) return;
  }
  if (!memo.valid()) return;
  struct stat existing {};
  if (::fstatat(memo.get(), name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0) return;
  if (const int error = publish_file(memo.get(), name,
                                     "zerojit: entries here were compiled with " +
                                         std::string(to_string(artifact.language)) + " compiler " +
                                         std::string(version) + "\n")) {
    report_write_failure("the record of the compiler version", error);
    std::lock_guard lock(recorded_mutex);
    recorded.erase(name);  // not recorded: the next entry's publish tries again
  }
}

std::size_t DiskCacheImpl::remove_version_records() {
  if (writable_layer() == nullptr || !memo.valid()) return 0;
  std::size_t removed = 0;
  for (const disk::DirectoryEntry& item : disk::list_directory(memo.get())) {
    if (item.name.starts_with(disk::kVersionRecordPrefix) &&
        ::unlinkat(memo.get(), item.name.c_str(), 0) == 0) {
      ++removed;
    }
  }
  std::lock_guard lock(recorded_mutex);
  recorded.clear();
  return removed;
}

}  // namespace detail

using namespace detail::disk;

std::vector<std::string> DiskCache::recorded_compiler_versions(Language language,
                                                               std::string_view arch) {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  const bool nvrtc = entry_kind(language).compiled_by_nvrtc;
  const std::string prefix =
      nvrtc ? std::string(kVersionRecordPrefix) : detail::language_record_prefix(language, arch);
  std::set<std::string> versions;
  for (const auto& layer : s.layers) {
    if (!layer.versions.valid()) continue;
    for (const DirectoryEntry& item : list_directory(layer.versions.get())) {
      if (!item.name.starts_with(prefix) || !S_ISREG(item.info.st_mode)) continue;
      const std::string version = item.name.substr(prefix.size());
      const bool plausible =
          nvrtc ? detail::plausible_version(version) : detail::plausible_token(version);
      if (plausible) versions.insert(version);
    }
  }
  return {versions.begin(), versions.end()};
}

std::optional<std::string> DiskCache::recall_nvrtc_version(std::string_view fingerprint) {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  if (!s.memo.valid()) return std::nullopt;
  const std::string name = s.memo_name(fingerprint);
  Fd file = open_at(s.memo.get(), name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!file.valid()) return std::nullopt;
  struct stat info {};
  std::string text;
  if (::fstat(file.get(), &info) != 0 || !S_ISREG(info.st_mode) ||
      static_cast<std::uint64_t>(info.st_size) > kMaxMemoBytes ||
      !read_all(file.get(), kMaxMemoBytes + 1, text)) {
    return std::nullopt;
  }
  // Accepted only when it is exactly what remember_nvrtc_version writes for this fingerprint
  // and some version: anything else is ignored and later rewritten.
  const std::size_t start = text.find("\nversion=");
  const std::size_t end = start == std::string::npos ? start : text.find('\n', start + 1);
  if (end == std::string::npos) return std::nullopt;
  const std::string version = text.substr(start + 9, end - start - 9);
  if (!detail::plausible_version(version) ||
      text != detail::DiskCacheImpl::memo_text(fingerprint, version)) {
    return std::nullopt;
  }
  return version;
}

void DiskCache::remember_nvrtc_version(std::string_view fingerprint,
                                       std::string_view version) noexcept {
  detail::DiskCacheImpl& s = *impl_;
  try {
    s.ensure_open();
    if (s.writable_layer() == nullptr || !s.memo.valid()) return;
    if (const int error = s.publish_file(s.memo.get(), s.memo_name(fingerprint),
                                         detail::DiskCacheImpl::memo_text(fingerprint, version))) {
      s.report_write_failure("the NVRTC version memo", error);
    }
  } catch (...) {
    s.write_failures.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace zerojit

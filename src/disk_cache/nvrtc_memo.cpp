// The NVRTC version memo (docs/CACHE.md, "NVRTC version memo"): a process whose keys are all
// on disk never loads NVRTC just to name its version.
#include <fcntl.h>

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

}  // namespace detail

using namespace detail::disk;

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
  const bool plausible = !version.empty() && version.size() <= 32 &&
                         std::all_of(version.begin(), version.end(),
                                     [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
  if (!plausible || text != detail::DiskCacheImpl::memo_text(fingerprint, version)) {
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

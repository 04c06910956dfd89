// Names and words of the disk cache: entry file names, sizes and hashes as text, and the
// environment flags it reads.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "disk_cache/impl.hpp"
#include "environment.hpp"
#include "zerojit/error.hpp"

namespace zerojit::detail::disk {

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return buffer;
}

std::string hash_text(std::uint64_t hash) {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "xxh3:%016" PRIx64, hash);
  return buffer;
}

std::string entry_name(const ProgramIdentity& identity) {
  return identity.hex() + std::string(kEntrySuffix);
}

std::optional<ProgramIdentity> identity_of_entry_name(std::string_view name) {
  if (name.size() != 32 + kEntrySuffix.size() || !name.ends_with(kEntrySuffix)) return {};
  try {
    return ProgramIdentity::from_hex(name.substr(0, 32));
  } catch (const Error&) {
    return {};
  }
}

}  // namespace zerojit::detail::disk

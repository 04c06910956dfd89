// The management reports as JSON and text (listings, verify, gc, explain). JSON is written
// with nlohmann-json in field order; bytes that are not UTF-8 (a path, a key text) are
// replaced by U+FFFD instead of failing the whole report.
#include <nlohmann/json.hpp>

#include "disk_cache/impl.hpp"

namespace zerojit {

namespace {

using Json = nlohmann::ordered_json;

std::string dump(const Json& document) {
  return document.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json entry_document(const CacheEntryInfo& entry) {
  Json out = {{"identity", entry.identity},
              {"kernel", entry.kernel},
              {"key", entry.key},
              {"arch", entry.arch},
              {"language", to_string(entry.language)},
              {"compiler", entry.compiler_version},
              // Kept for readers of the first layout: NVRTC's version, on CUDA C++ entries.
              {"nvrtc", entry_kind(entry.language).compiled_by_nvrtc ? Json(entry.compiler_version)
                                                                     : Json()},
              {"size", entry.size_bytes},
              {"age_seconds", entry.age_seconds},
              {"layer", entry.layer},
              {"read_only", entry.read_only},
              {"path", entry.path},
              {"status", entry.busy ? std::string_view("busy") : to_string(entry.problem)}};
  if (!entry.launch.empty()) out["launch"] = entry.launch;
  if (!entry.detail.empty()) out["detail"] = entry.detail;
  return out;
}

Json entries_document(const std::vector<CacheEntryInfo>& entries) {
  Json out = Json::array();
  for (const CacheEntryInfo& entry : entries) out.push_back(entry_document(entry));
  return out;
}

}  // namespace

std::string to_json(const std::vector<CacheEntryInfo>& entries) {
  return dump(entries_document(entries));
}

std::string CacheVerifyReport::to_json() const {
  return dump({{"checked", checked},
               {"valid", valid},
               {"set_aside", set_aside},
               {"bad", entries_document(bad)},
               {"busy", entries_document(busy)}});
}

std::string CacheGcReport::to_json() const {
  return dump({{"quota_bytes", quota_bytes},
               {"removed", removed},
               {"removed_bytes", removed_bytes},
               {"kept", kept},
               {"kept_bytes", kept_bytes},
               {"busy", busy},
               {"other_files_removed", other_files_removed}});
}

std::string MissExplanation::summary() const {
  const EntryKind& kind = entry_kind(language);
  const std::string compiler =
      std::string(kind.compiler) + (kind.compiled_by_nvrtc ? "" : " compiler");
  std::string out = kernel + " [" + key + "] for " + arch + " with " + compiler + " " +
                    compiler_version + " (identity " + identity + "): ";
  if (present) return out + "hit: the entry is in " + present_layer;
  out += "miss";
  if (!present_problem.empty())
    out += " (an entry with this identity is bad: " + present_problem + ")";
  if (!nearest) {
    return out + "; the cache holds no entry of kernel " + kernel;
  }
  out += "; nearest of " + std::to_string(same_kernel_entries) +
         " entries of the kernel: " + nearest->identity + " [" + nearest->key + "] for " +
         nearest->arch + "; ";
  if (differences.empty()) return out + "no component differs (a hash collision?)";
  out += "differs in ";
  for (std::size_t i = 0; i < differences.size(); ++i) {
    const IdentityDifference& d = differences[i];
    out += (i == 0 ? "" : ", ") + d.component + " (wanted " + d.wanted + ", found " + d.found + ")";
  }
  return out;
}

std::string MissExplanation::to_json() const {
  Json out = {{"kernel", kernel},
              {"key", key},
              {"arch", arch},
              {"language", to_string(language)},
              {"compiler", compiler_version},
              {"nvrtc", entry_kind(language).compiled_by_nvrtc ? Json(compiler_version) : Json()},
              {"identity", identity},
              {"hit", present}};
  if (present) out["layer"] = present_layer;
  if (!present_problem.empty()) out["bad_entry"] = present_problem;
  out["same_kernel_entries"] = same_kernel_entries;
  out["nearest"] = nearest ? entry_document(*nearest) : Json(nullptr);
  Json listed = Json::array();
  for (const IdentityDifference& difference : differences) {
    listed.push_back({{"component", difference.component},
                      {"wanted", difference.wanted},
                      {"found", difference.found}});
  }
  out["differences"] = std::move(listed);
  return dump(out);
}

}  // namespace zerojit

// The management reports as JSON and text (listings, verify, gc, explain).
#include "disk_cache/impl.hpp"
#include "zerojit/key.hpp"

namespace zerojit {

namespace {

void append_text_field(std::string& out, const char* name, std::string_view value) {
  out += '"';
  out += name;
  out += "\":";
  detail::append_json_string(out, value);
}

void append_number_field(std::string& out, const char* name, std::uint64_t value) {
  out += '"';
  out += name;
  out += "\":" + std::to_string(value);
}

}  // namespace

namespace detail::disk {

std::string entry_json(const CacheEntryInfo& entry) {
  std::string out = "{";
  append_text_field(out, "identity", entry.identity);
  out += ',';
  append_text_field(out, "kernel", entry.kernel);
  out += ',';
  append_text_field(out, "key", entry.key);
  out += ',';
  append_text_field(out, "arch", entry.arch);
  out += ',';
  append_text_field(out, "nvrtc", entry.nvrtc_version);
  out += ',';
  append_number_field(out, "size", entry.size_bytes);
  out += ",\"age_seconds\":";
  detail::append_double(out, entry.age_seconds);
  out += ',';
  append_text_field(out, "layer", entry.layer);
  out += ",\"read_only\":" + std::string(entry.read_only ? "true" : "false") + ",";
  append_text_field(out, "path", entry.path);
  out += ',';
  append_text_field(out, "status", to_string(entry.problem));
  if (!entry.detail.empty()) {
    out += ',';
    append_text_field(out, "detail", entry.detail);
  }
  return out + "}";
}

}  // namespace detail::disk

std::string to_json(const std::vector<CacheEntryInfo>& entries) {
  std::string out = "[";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i != 0) out += ',';
    out += detail::disk::entry_json(entries[i]);
  }
  return out + "]";
}

std::string CacheVerifyReport::to_json() const {
  std::string out = "{";
  append_number_field(out, "checked", checked);
  out += ',';
  append_number_field(out, "valid", valid);
  out += ",\"set_aside\":" + std::string(set_aside ? "true" : "false");
  out += ",\"bad\":" + zerojit::to_json(bad) + "}";
  return out;
}

std::string CacheGcReport::to_json() const {
  std::string out = "{";
  append_number_field(out, "quota_bytes", quota_bytes);
  out += ',';
  append_number_field(out, "removed", removed);
  out += ',';
  append_number_field(out, "removed_bytes", removed_bytes);
  out += ',';
  append_number_field(out, "kept", kept);
  out += ',';
  append_number_field(out, "kept_bytes", kept_bytes);
  out += ',';
  append_number_field(out, "busy", busy);
  out += ',';
  append_number_field(out, "other_files_removed", other_files_removed);
  return out + "}";
}

std::string MissExplanation::summary() const {
  std::string out = kernel + " [" + key + "] for " + arch + " with NVRTC " + nvrtc_version +
                    " (identity " + identity + "): ";
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
  std::string out = "{";
  append_text_field(out, "kernel", kernel);
  out += ',';
  append_text_field(out, "key", key);
  out += ',';
  append_text_field(out, "arch", arch);
  out += ',';
  append_text_field(out, "nvrtc", nvrtc_version);
  out += ',';
  append_text_field(out, "identity", identity);
  out += ",\"hit\":" + std::string(present ? "true" : "false");
  if (present) {
    out += ',';
    append_text_field(out, "layer", present_layer);
  }
  if (!present_problem.empty()) {
    out += ',';
    append_text_field(out, "bad_entry", present_problem);
  }
  out += ",\"same_kernel_entries\":" + std::to_string(same_kernel_entries);
  out += ",\"nearest\":" + (nearest ? detail::disk::entry_json(*nearest) : std::string("null"));
  out += ",\"differences\":[";
  for (std::size_t i = 0; i < differences.size(); ++i) {
    out += i == 0 ? "{" : ",{";
    append_text_field(out, "component", differences[i].component);
    out += ',';
    append_text_field(out, "wanted", differences[i].wanted);
    out += ',';
    append_text_field(out, "found", differences[i].found);
    out += '}';
  }
  return out + "]}";
}

}  // namespace zerojit

// Ranks that agree (include/zerojit/ranks.hpp): the records, their digest and the comparison
// with its messages, which Python's groups call too (python/zerojit/runtime/agreement.py), and
// RankGroup.agree's store protocol for ranks that warm up from C++.
#include "zerojit/ranks.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <tuple>

#include "zerojit/registry.hpp"
#include "zerojit/runtime.hpp"

// Header-only, as the identities are hashed (program.cpp): nothing to link.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace zerojit {

namespace {

using nlohmann::json;
using KeyId = std::tuple<std::string, std::string, std::string>;  // kernel, key text, arch

constexpr int kFormat = 1;
constexpr std::size_t kShownKeys = 5;    // the first differing keys a message names
constexpr std::size_t kShownFields = 3;  // the first differing configuration fields

std::string first_line(std::string_view text) {
  const std::size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return {};
  text.remove_prefix(start);
  return std::string(text.substr(0, text.find('\n')));
}

json config_value(const std::string& config) {
  if (config.empty()) return nullptr;
  try {
    return json::parse(config);
  } catch (const json::exception& error) {
    throw Error("zerojit ranks: the configuration is not JSON (" + std::string(error.what()) +
                "): " + config.substr(0, 80));
  }
}

json entries_value(const std::vector<RankEntry>& entries) {
  json out = json::array();
  for (const RankEntry& entry : entries) {
    out.push_back({entry.kernel, entry.key, entry.arch, entry.identity});
  }
  return out;
}

std::string hex128(const XXH128_hash_t& hash) {
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(hash.high64),
                static_cast<unsigned long long>(hash.low64));
  return text;
}

// --- message text, as agreement.py writes it ------------------------------------------------

// [0, 1, 2, 4, 6, 7] -> "0-2, 4, 6-7" (sorted input).
std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t index = 0; index < ranks.size();) {
    std::size_t end = index;
    while (end + 1 < ranks.size() && ranks[end + 1] == ranks[end] + 1) ++end;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[index]);
    if (end != index) out += "-" + std::to_string(ranks[end]);
    index = end + 1;
  }
  return out;
}

std::string plural(const std::vector<int>& ranks) {
  return (ranks.size() > 1 ? "ranks " : "rank ") + ranks_text(ranks);
}

void flatten(const json& value, const std::string& path, std::map<std::string, json>& out) {
  if (!value.is_object()) {
    out[path] = value;
    return;
  }
  for (const auto& [name, inner] : value.items()) {
    flatten(inner, path.empty() ? name : path + "." + name, out);
  }
}

std::string shown(const std::map<std::string, json>& fields, const std::string& name) {
  const auto found = fields.find(name);
  return found == fields.end() ? "null" : found->second.dump();
}

std::optional<std::string> config_cause(const RankRecord& record, const RankRecord& reference) {
  const json ours = config_value(record.config);
  const json theirs = config_value(reference.config);
  if (ours == theirs || ours.is_null() || theirs.is_null()) return std::nullopt;
  std::map<std::string, json> a;
  std::map<std::string, json> b;
  flatten(ours, "", a);
  flatten(theirs, "", b);
  std::set<std::string> names;
  for (const auto& [name, _] : a) names.insert(name);
  for (const auto& [name, _] : b) names.insert(name);
  std::vector<std::string> fields;
  for (const std::string& name : names) {
    if (shown(a, name) != shown(b, name)) fields.push_back(name);
  }
  std::string text = "another configuration: ";
  for (std::size_t index = 0; index < std::min(fields.size(), kShownFields); ++index) {
    if (index > 0) text += "; ";
    text += fields[index] + " = " + shown(a, fields[index]) + " on rank " +
            std::to_string(record.rank) + ", " + shown(b, fields[index]) + " on rank " +
            std::to_string(reference.rank);
  }
  if (fields.size() > kShownFields) {
    text += " (and " + std::to_string(fields.size() - kShownFields) + " more)";
  }
  return text;
}

std::string joined(const std::vector<std::string>& items, std::string_view empty) {
  if (items.empty()) return std::string(empty);
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string compiler_cause(const RankRecord& record, const RankRecord& reference) {
  std::set<std::string> names;
  for (const auto& [name, _] : record.compilers) names.insert(name);
  for (const auto& [name, _] : reference.compilers) names.insert(name);
  auto version = [](const RankRecord& of, const std::string& name) {
    const auto found = of.compilers.find(name);
    return found == of.compilers.end() ? std::string("absent") : found->second;
  };
  std::string text = "another compiler: ";
  bool first = true;
  for (const std::string& name : names) {
    if (version(record, name) == version(reference, name)) continue;
    text += (first ? "" : "; ") + name + " " + version(record, name) + " on rank " +
            std::to_string(record.rank) + ", " + version(reference, name) + " on rank " +
            std::to_string(reference.rank);
    first = false;
  }
  return text;
}

std::string kernels_of(const std::vector<KeyId>& keys) {
  std::set<std::string> names;
  for (const KeyId& key : keys) names.insert(std::get<0>(key));
  std::vector<std::string> first(names.begin(), names.end());
  const bool more = first.size() > 3;
  if (more) first.resize(3);
  return joined(first, "") + (more ? ", ..." : "");
}

using Identities = std::map<KeyId, std::string>;

Identities identities_of(const RankRecord& record) {
  Identities out;
  for (const RankEntry& entry : record.entries) {
    out[{entry.kernel, entry.key, entry.arch}] = entry.identity;
  }
  return out;
}

// What the keys say, when nothing else explains the difference (another arch changes every
// key; saying so key by key would hide the cause).
void add_key_causes(std::vector<std::string>& causes, const RankRecord& record,
                    const RankRecord& reference, const std::vector<KeyId>& lacking,
                    const std::vector<KeyId>& extra, bool other_programs) {
  const std::string rank = std::to_string(record.rank);
  const std::string ref = std::to_string(reference.rank);
  if (!lacking.empty() && extra.empty()) {
    causes.push_back("a narrowed warmup space: rank " + rank + " lacks " +
                     std::to_string(lacking.size()) + " keys of " + kernels_of(lacking) +
                     " that rank " + ref + " warms");
  } else if (!extra.empty() && lacking.empty()) {
    causes.push_back("a wider warmup space: rank " + rank + " warms " +
                     std::to_string(extra.size()) + " keys of " + kernels_of(extra) +
                     " that rank " + ref + " does not");
  } else if (!extra.empty() && !lacking.empty()) {
    causes.push_back("other warmup keys: " + std::to_string(extra.size()) + " only on rank " +
                     rank + ", " + std::to_string(lacking.size()) + " only on rank " + ref);
  }
  if (other_programs) {
    causes.push_back(
        "other programs for the same keys (another kernel source, header, compile option or "
        "compiler)");
  }
}

std::optional<std::string> identity_at(const Identities& identities, const KeyId& key) {
  const auto found = identities.find(key);
  if (found == identities.end()) return std::nullopt;
  return found->second;
}

// The cause and the differing keys of `record` against `reference` (agreement._compare).
RankDifference compare_records(const RankRecord& record, const RankRecord& reference) {
  std::vector<std::string> causes;
  const std::optional<std::string> config = config_cause(record, reference);
  if (config) causes.push_back(*config);
  if (record.archs != reference.archs) {
    causes.push_back("another arch: " + joined(record.archs, "none") + " on rank " +
                     std::to_string(record.rank) + ", " + joined(reference.archs, "none") +
                     " on rank " + std::to_string(reference.rank));
  }
  if (record.compilers != reference.compilers) causes.push_back(compiler_cause(record, reference));
  const Identities ours = identities_of(record);
  const Identities theirs = identities_of(reference);
  std::vector<KeyId> lacking;
  std::vector<KeyId> extra;
  std::vector<KeyId> failed;
  std::set<KeyId> differing;
  bool other_programs = false;
  for (const auto& [key, identity] : theirs) {
    if (!ours.contains(key)) lacking.push_back(key);
  }
  for (const auto& [key, identity] : ours) {
    const bool fails = identity.starts_with("failed");
    if (fails) failed.push_back(key);
    const auto found = theirs.find(key);
    if (found == theirs.end()) {
      extra.push_back(key);
    } else if (found->second != identity) {
      differing.insert(key);
      other_programs = other_programs || !fails;
    }
  }
  if (!failed.empty()) {
    causes.push_back("rank " + std::to_string(record.rank) + " failed to compile " +
                     std::to_string(failed.size()) + " keys (" + first_line(ours.at(failed[0])) +
                     ")");
  }
  if (!config && causes.size() <= (failed.empty() ? 0U : 1U)) {
    add_key_causes(causes, record, reference, lacking, extra, other_programs);
  }
  differing.insert(lacking.begin(), lacking.end());
  differing.insert(extra.begin(), extra.end());
  RankDifference difference{{record.rank}, reference.rank, {}, {}};
  for (std::size_t index = 0; index < causes.size(); ++index) {
    difference.cause += (index > 0 ? "; " : "") + causes[index];
  }
  if (difference.cause.empty()) difference.cause = "another manifest digest";
  for (const KeyId& key : differing) {
    const auto& [kernel, text, arch] = key;
    difference.keys.push_back(
        {kernel, text, arch, identity_at(ours, key), identity_at(theirs, key)});
  }
  return difference;
}

std::string key_line(const RankKeyDifference& entry, int rank, int reference) {
  std::string where = entry.kernel + " [" + entry.key + "] on " + entry.arch;
  if (!entry.rank_identity) return where + ": only on rank " + std::to_string(reference);
  if (!entry.reference_identity) return where + ": only on rank " + std::to_string(rank);
  return where + ": identity " + entry.rank_identity->substr(0, 40) + " on rank " +
         std::to_string(rank) + ", " + entry.reference_identity->substr(0, 40) + " on rank " +
         std::to_string(reference);
}

void add_difference_lines(std::vector<std::string>& lines, const RankDifference& difference,
                          const std::vector<int>& reference) {
  const std::string agreeing =
      reference.size() > 1 ? " (" + plural(reference) + " agree)" : std::string();
  lines.push_back("  " + plural(difference.ranks) +
                  (difference.ranks.size() > 1 ? " differ" : " differs") + " from rank " +
                  std::to_string(reference[0]) + agreeing + ": " + difference.cause);
  const std::size_t shown_keys = std::min(difference.keys.size(), kShownKeys);
  for (std::size_t index = 0; index < shown_keys; ++index) {
    lines.push_back("    " + key_line(difference.keys[index], difference.ranks[0], reference[0]));
  }
  if (difference.keys.size() > kShownKeys) {
    lines.push_back("    ... and " + std::to_string(difference.keys.size() - kShownKeys) +
                    " more keys");
  }
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);  // Python's {:g}
  return text;
}

bool is_aborted(const RankRecord& record) { return record.aborted && !record.aborted->empty(); }

}  // namespace

// --- records ----------------------------------------------------------------------------------

void RankRecord::seal() {
  std::sort(archs.begin(), archs.end());
  std::sort(entries.begin(), entries.end());
  const json agreed = {{"archs", archs},
                       {"compilers", compilers},
                       {"config", config_value(config)},
                       {"entries", entries_value(entries)}};
  const std::string text = agreed.dump();  // keys sorted: the same text on every rank
  digest = hex128(XXH3_128bits(text.data(), text.size()));
}

std::string RankRecord::to_json() const {
  json out = {{"format", kFormat},
              {"rank", rank},
              {"aborted", aborted ? json(*aborted) : json(nullptr)},
              {"archs", archs},
              {"compilers", compilers},
              {"config", config_value(config)},
              {"entries", entries_value(entries)},
              {"digest", digest}};
  return out.dump();
}

RankRecord RankRecord::from_json(std::string_view text) {
  try {
    const json in = json::parse(text);
    RankRecord record;
    record.rank = in.at("rank").get<int>();
    if (!in.at("aborted").is_null()) record.aborted = in.at("aborted").get<std::string>();
    record.archs = in.at("archs").get<std::vector<std::string>>();
    record.compilers = in.at("compilers").get<std::map<std::string, std::string>>();
    if (!in.at("config").is_null()) record.config = in.at("config").dump();
    for (const json& entry : in.at("entries")) {
      record.entries.push_back({entry.at(0).get<std::string>(), entry.at(1).get<std::string>(),
                                entry.at(2).get<std::string>(), entry.at(3).get<std::string>()});
    }
    record.digest = in.at("digest").get<std::string>();
    return record;
  } catch (const json::exception& error) {
    throw Error("zerojit ranks: not a rank record (" + std::string(error.what()) +
                "): " + std::string(text.substr(0, 80)));
  }
}

RankRecord warmup_rank_record(const WarmupReport& report, const Manifest& manifest,
                              std::string config_json) {
  std::map<std::pair<std::string, std::string>, const ManifestEntry*> programs;
  for (const ManifestEntry& entry : manifest.entries) {
    if (entry.kernel != nullptr) programs[{entry.kernel->name(), entry.key_text}] = &entry;
  }
  RankRecord record;
  std::set<Language> languages;
  for (const KeyReport& key : report.keys) {
    std::string identity;
    const auto found = programs.find({key.kernel, key.key});
    if (!key.error.empty()) {
      identity = "failed: " + first_line(key.error);
    } else if (found != programs.end() && found->second->program) {
      try {
        identity = Runtime::instance().identity_of(found->second->program(), key.arch).hex();
      } catch (const std::exception& error) {  // e.g. a compiler gone: the key still compares
        identity = "no identity: " + first_line(error.what());
      }
    }
    record.entries.push_back({key.kernel, key.key, key.arch, identity});
    languages.insert(key.language);
  }
  for (const Language language : languages) {
    for (const std::string& arch : report.archs) {
      const std::string name = std::string(to_string(language)) + "@" + arch;
      try {
        record.compilers[name] = Runtime::instance().compiler_version(language, arch);
      } catch (const std::exception& error) {
        record.compilers[name] = "unknown (" + first_line(error.what()) + ")";
      }
    }
  }
  record.archs = report.archs;
  record.config = std::move(config_json);
  record.seal();
  return record;
}

// --- the comparison ---------------------------------------------------------------------------

std::optional<RankDisagreement> compare_ranks(const std::map<int, RankRecord>& records,
                                              int world_size, std::vector<int> missing,
                                              double timeout_s, std::string_view prefix) {
  std::sort(missing.begin(), missing.end());
  std::vector<int> aborted;
  std::map<std::string, std::vector<int>> groups;  // digest -> its ranks, ascending
  for (const auto& [rank, record] : records) {
    if (is_aborted(record)) {
      aborted.push_back(rank);
    } else {
      groups[record.digest].push_back(rank);
    }
  }
  if (missing.empty() && aborted.empty() && groups.size() <= 1) return std::nullopt;
  std::vector<std::vector<int>> ordered;
  for (auto& [_, ranks] : groups) ordered.push_back(std::move(ranks));
  std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
    return a.size() != b.size() ? a.size() > b.size() : a[0] < b[0];
  });
  RankDisagreement found;
  std::vector<std::string> lines;
  for (std::size_t index = 1; index < ordered.size(); ++index) {
    RankDifference difference =
        compare_records(records.at(ordered[index][0]), records.at(ordered[0][0]));
    difference.ranks = ordered[index];
    add_difference_lines(lines, difference, ordered[0]);
    found.differences.push_back(std::move(difference));
  }
  for (const int rank : aborted) {
    const std::string text = first_line(*records.at(rank).aborted);
    found.differences.push_back({{rank}, std::nullopt, text, {}});
    lines.push_back("  rank " + std::to_string(rank) + ": its warmup raised: " + text);
  }
  if (!missing.empty()) {
    lines.push_back("  " + plural(missing) + " never published " +
                    (missing.size() > 1 ? "their" : "its") + " warmup within " +
                    seconds_text(timeout_s) +
                    " s (died, hung, or did not warm up with this group)");
  }
  std::set<int> at_fault(missing.begin(), missing.end());
  for (const RankDifference& difference : found.differences) {
    at_fault.insert(difference.ranks.begin(), difference.ranks.end());
  }
  found.ranks.assign(at_fault.begin(), at_fault.end());
  found.missing = std::move(missing);
  const std::string where =
      prefix.empty() ? std::string() : ", store prefix '" + std::string(prefix) + "'";
  found.message = "the ranks did not warm up the same kernels (" + std::to_string(world_size) +
                  " ranks" + where + "; " + plural(found.ranks) + " at fault):";
  for (const std::string& line : lines) found.message += "\n" + line;
  return found;
}

// --- the protocol (RankGroup.agree) ----------------------------------------------------------

namespace {

// Polls the one counter every rank increments (one store call per poll whatever the group's
// size), backing off from 5 ms to 100 ms, until every rank arrived or the deadline passed.
std::int64_t wait_for_ranks(RankStore& store, const std::string& key, std::int64_t arrived,
                            int world_size, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  std::chrono::milliseconds pause(5);
  while (arrived < world_size && Clock::now() < deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    std::this_thread::sleep_for(std::max(std::chrono::milliseconds(0), std::min(pause, left)));
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
    arrived = store.add(key, 0);
  }
  return arrived;
}

[[noreturn]] void throw_verdict(RankStore& store, const std::string& base, int rank) {
  const std::optional<std::string> text = store.read(base + "/verdict");
  json verdict =
      json::array({"the ranks did not warm up the same kernels (another rank's "
                   "verdict is not in the store)",
                   json::array(), json::array()});
  if (text) {
    try {
      verdict = json::parse(*text);
    } catch (const json::exception&) {  // keep the placeholder: the round failed regardless
    }
  }
  throw RankAgreementError(verdict.at(0).get<std::string>() + "\n  (rank " + std::to_string(rank) +
                               " published after another rank's timeout)",
                           verdict.at(1).get<std::vector<int>>(),
                           verdict.at(2).get<std::vector<int>>());
}

}  // namespace

std::map<int, RankRecord> agree_across_ranks(RankStore& store, int rank, int world_size,
                                             const RankRecord& record,
                                             std::chrono::milliseconds timeout,
                                             std::string_view prefix, int round) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw Error("zerojit ranks: rank " + std::to_string(rank) + " is not in a group of " +
                std::to_string(world_size));
  }
  if (round < 1) throw Error("zerojit ranks: round " + std::to_string(round) + " is not >= 1");
  const std::string base = std::string(prefix) + "/warmup/" + std::to_string(round);
  RankRecord own = record;
  own.rank = rank;
  store.set(base + "/" + std::to_string(rank), own.to_json());
  // The flag after the value: a rank that sees the flag can read the value without waiting.
  store.add(base + "/" + std::to_string(rank) + "/set", 1);
  wait_for_ranks(store, base + "/arrived", store.add(base + "/arrived", 1), world_size, timeout);
  std::map<int, RankRecord> records;
  std::vector<int> missing;
  for (int other = 0; other < world_size; ++other) {
    const std::string key = base + "/" + std::to_string(other);
    std::optional<std::string> text;
    if (other != rank && store.add(key + "/set", 0) > 0) text = store.read(key);
    if (other == rank) {
      records[other] = own;
    } else if (text) {
      records[other] = RankRecord::from_json(*text);
    } else {
      missing.push_back(other);
    }
  }
  const double timeout_s = static_cast<double>(timeout.count()) / 1000.0;
  std::optional<RankDisagreement> found =
      compare_ranks(records, world_size, missing, timeout_s, prefix);
  if (found) {
    if (!found->missing.empty()) {
      // A rank that arrives after this one gave up sees every record and would agree, then
      // serve alone: the verdict tells it the round failed.
      store.set(base + "/verdict",
                json::array({found->message, found->ranks, found->missing}).dump());
      store.add(base + "/failed", 1);
    }
    throw RankAgreementError(found->message, found->ranks, found->missing);
  }
  if (store.add(base + "/failed", 0) > 0) throw_verdict(store, base, rank);
  return records;
}

}  // namespace zerojit

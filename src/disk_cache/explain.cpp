// Why a key misses: the nearest entry of the same kernel and the identity components that
// differ from it (docs/CACHE.md, `zerojit cache explain`).
#include <algorithm>
#include <map>

#include "disk_cache/impl.hpp"

namespace zerojit {

using namespace detail::disk;

namespace {

std::string compiler_name(Language language) { return std::string(entry_kind(language).compiler); }

// A key's text as its fields, "dtype=f32, unroll=4" -> {dtype: f32, unroll: 4}. A string value
// is quoted, and may hold ", " itself (`a="x, b=y"`), so separators inside quotes are skipped.
std::map<std::string, std::string> key_fields(std::string_view text) {
  std::map<std::string, std::string> fields;
  std::size_t start = 0;
  bool quoted = false;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size()) {
      if (text[i] == '\\' && quoted) {
        ++i;
        continue;
      }
      if (text[i] == '"') quoted = !quoted;
      if (quoted || text.compare(i, 2, ", ") != 0) continue;
    }
    const std::string_view field = text.substr(start, i - start);
    const std::size_t equals = field.find('=');
    fields[std::string(field.substr(0, equals))] =
        equals == std::string_view::npos ? std::string() : std::string(field.substr(equals + 1));
    start = i + 2;
  }
  return fields;
}

// How many fields two keys of one kernel disagree on (a field only one has counts too).
std::size_t key_distance(const std::map<std::string, std::string>& a, std::string_view text) {
  const std::map<std::string, std::string> b = key_fields(text);
  std::size_t differing = 0;
  for (const auto& [name, value] : a) {
    const auto other = b.find(name);
    differing += other == b.end() || other->second != value ? 1 : 0;
  }
  for (const auto& [name, value] : b) differing += a.count(name) ? 0 : 1;
  return differing;
}

// Every sound entry, once: what it records and where it is (its cubin is not kept).
struct Candidate {
  CacheEntryInfo info;
  IdentityComponents components;
  ProgramIdentity identity;
  std::uint32_t format_version = 0;
  struct stat used {};
};

// The layers are read once for all the programs explained, not once per program.
struct Survey {
  std::vector<Candidate> candidates;
  std::map<ProgramIdentity, std::string> bad;  // identity -> problem of its entry
};

Candidate candidate_of(const detail::DiskCacheImpl::Layer& layer, const std::string& name,
                       const ProgramIdentity& identity,
                       const detail::DiskCacheImpl::ReadResult& read) {
  const CompiledArtifact& artifact = *read.decoded.artifact;
  Candidate candidate;
  candidate.info.path = layer.path + "/" + kEntriesDir + "/" + name;
  candidate.info.layer = layer.path;
  candidate.info.read_only = !layer.writable;
  candidate.info.identity = identity.hex();
  candidate.info.kernel = artifact.kernel_name;
  candidate.info.key = artifact.key_text;
  candidate.info.arch = artifact.arch;
  candidate.info.language = artifact.language;
  candidate.info.compiler_version = artifact.compiler_version;
  candidate.info.size_bytes = static_cast<std::uint64_t>(read.info.st_size);
  candidate.info.age_seconds = std::max(0.0, seconds_since(read.info.st_mtim));
  candidate.components = artifact.components;
  candidate.identity = identity;
  candidate.format_version = read.decoded.format_version;
  candidate.used = read.info;
  return candidate;
}

Survey survey_entries(detail::DiskCacheImpl& s) {
  Survey survey;
  for (const auto& layer : s.layers) {
    for (const auto& entry : s.scan_entries(layer)) {
      const std::optional<ProgramIdentity> named = identity_of_entry_name(entry.name);
      if (!named) continue;
      const auto read = s.read_entry(layer, entry.name, &*named, false);
      if (read.absent) continue;
      if (read.busy) {
        survey.bad.emplace(*named, "busy: " + read.decoded.detail);
        continue;
      }
      if (!read.decoded.ok() || !read.decoded.artifact) {
        survey.bad.emplace(
            *named, std::string(to_string(read.decoded.problem)) + ": " + read.decoded.detail);
        continue;
      }
      survey.candidates.push_back(candidate_of(layer, entry.name, *named, read));
    }
  }
  return survey;
}

struct Component {
  const char* name;
  std::uint64_t IdentityComponents::*member;
};
constexpr Component kComponents[] = {
    {"format", &IdentityComponents::format},    {"source", &IdentityComponents::source},
    {"names", &IdentityComponents::names},      {"options", &IdentityComponents::options},
    {"key", &IdentityComponents::key},          {"arch", &IdentityComponents::arch},
    {"compiler", &IdentityComponents::compiler}};

std::size_t component_distance(const IdentityComponents& a, const IdentityComponents& b) {
  std::size_t differing = 0;
  for (const Component& component : kComponents) {
    differing += a.*component.member != b.*component.member ? 1 : 0;
  }
  return differing;
}

// The nearest entry of the program's kernel: fewest differing identity components; among
// equals, the key with the fewest differing fields (every other key of the kernel differs in
// the component "key" alike, so this is what tells the most similar key); then the most
// recently used.
const Candidate* nearest_entry(const std::vector<Candidate>& candidates, const Program& program,
                               const IdentityComponents& wanted) {
  const std::map<std::string, std::string> wanted_fields = key_fields(program.key_text);
  const Candidate* nearest = nullptr;
  std::pair<std::size_t, std::size_t> nearest_distance;
  for (const Candidate& candidate : candidates) {
    if (candidate.info.kernel != program.kernel_name) continue;
    const std::pair<std::size_t, std::size_t> d{component_distance(candidate.components, wanted),
                                                key_distance(wanted_fields, candidate.info.key)};
    if (nearest == nullptr || d < nearest_distance ||
        (d == nearest_distance && mtime_before(nearest->used, candidate.used))) {
      nearest = &candidate;
      nearest_distance = d;
    }
  }
  return nearest;
}

// A component in words where it has any, so that the reader sees what to change; the others
// only as their hashes. `miss` holds the wanted key, arch and compiler.
IdentityDifference describe_difference(const Component& component, const MissExplanation& miss,
                                       const IdentityComponents& wanted, const Candidate& nearest) {
  IdentityDifference difference;
  difference.component = component.name;
  const std::string_view name = component.name;
  if (name == "format") {
    difference.wanted = "zerojit format " + std::to_string(kFormatVersion);
    difference.found = "zerojit format " + std::to_string(nearest.format_version);
  } else if (name == "key") {
    difference.wanted = miss.key;
    difference.found = nearest.info.key;
  } else if (name == "arch") {
    difference.wanted = miss.arch;
    difference.found = nearest.info.arch;
  } else if (name == "compiler") {
    difference.wanted = compiler_name(miss.language) + " " + miss.compiler_version;
    difference.found = compiler_name(nearest.info.language) + " " + nearest.info.compiler_version;
  } else {
    difference.wanted = hash_text(wanted.*component.member);
    difference.found = hash_text(nearest.components.*component.member);
  }
  return difference;
}

MissExplanation explain_miss(const Program& program, std::string_view arch,
                             const std::string& version, const Survey& survey) {
  const IdentityComponents wanted = identity_components(program, arch, version);
  const ProgramIdentity identity = identity_from_components(wanted);
  MissExplanation out;
  out.kernel = program.kernel_name;
  out.key = program.key_text;
  out.arch = std::string(arch);
  out.language = program.language;
  out.compiler_version = version;
  out.identity = identity.hex();
  if (const auto it = survey.bad.find(identity); it != survey.bad.end()) {
    out.present_problem = it->second;
  }
  for (const Candidate& candidate : survey.candidates) {
    if (candidate.identity == identity && !out.present) {
      out.present = true;
      out.present_layer = candidate.info.layer;
    }
    if (candidate.info.kernel == program.kernel_name) ++out.same_kernel_entries;
  }
  if (const Candidate* nearest = nearest_entry(survey.candidates, program, wanted)) {
    for (const Component& component : kComponents) {
      if (wanted.*component.member == nearest->components.*component.member) continue;
      out.differences.push_back(describe_difference(component, out, wanted, *nearest));
    }
    out.nearest = nearest->info;
  }
  return out;
}

}  // namespace

MissExplanation DiskCache::explain(const Program& program, std::string_view arch,
                                   std::string_view compiler_version) {
  return explain(std::vector<Program>{program}, arch,
                 [&](Language) { return std::string(compiler_version); })
      .front();
}

std::vector<MissExplanation> DiskCache::explain(
    const std::vector<Program>& programs, std::string_view arch,
    const std::function<std::string(Language language)>& compiler_version) {
  detail::DiskCacheImpl& s = *impl_;
  s.ensure_open();
  const Survey survey = survey_entries(s);
  std::vector<MissExplanation> explanations;
  for (const Program& program : programs) {
    explanations.push_back(explain_miss(program, arch, compiler_version(program.language), survey));
  }
  return explanations;
}

}  // namespace zerojit

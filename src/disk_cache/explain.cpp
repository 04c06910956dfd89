// Why a key misses: the nearest entry of the same kernel and the identity components that
// differ from it (docs/CACHE.md, `zerojit cache explain`).
#include <algorithm>
#include <map>

#include "disk_cache/impl.hpp"

namespace zerojit {

using namespace detail::disk;

namespace {

std::string compiler_name(Language language) {
  return language == Language::cuda ? "NVRTC" : std::string(to_string(language));
}

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

  // Every sound entry, once: what it records and where it is (its cubin is not kept).
  struct Candidate {
    CacheEntryInfo info;
    IdentityComponents components;
    ProgramIdentity identity;
    std::uint32_t format_version = 0;
    struct stat used {};
  };
  std::vector<Candidate> candidates;
  std::map<ProgramIdentity, std::string> bad;  // identity -> problem of its entry
  for (const auto& layer : s.layers) {
    for (const auto& entry : s.scan_entries(layer)) {
      const std::optional<ProgramIdentity> named = identity_of_entry_name(entry.name);
      if (!named) continue;
      const auto read = s.read_entry(layer, entry.name, &*named, false);
      if (read.absent) continue;
      if (read.busy) {
        bad.emplace(*named, "busy: " + read.decoded.detail);
        continue;
      }
      if (!read.decoded.ok() || !read.decoded.artifact) {
        bad.emplace(*named,
                    std::string(to_string(read.decoded.problem)) + ": " + read.decoded.detail);
        continue;
      }
      const CompiledArtifact& artifact = *read.decoded.artifact;
      Candidate candidate;
      candidate.info.path = layer.path + "/" + kEntriesDir + "/" + entry.name;
      candidate.info.layer = layer.path;
      candidate.info.read_only = !layer.writable;
      candidate.info.identity = named->hex();
      candidate.info.kernel = artifact.kernel_name;
      candidate.info.key = artifact.key_text;
      candidate.info.arch = artifact.arch;
      candidate.info.language = artifact.language;
      candidate.info.compiler_version = artifact.compiler_version;
      candidate.info.size_bytes = static_cast<std::uint64_t>(read.info.st_size);
      candidate.info.age_seconds = std::max(0.0, seconds_since(read.info.st_mtim));
      candidate.components = artifact.components;
      candidate.identity = *named;
      candidate.format_version = read.decoded.format_version;
      candidate.used = read.info;
      candidates.push_back(std::move(candidate));
    }
  }

  struct Component {
    const char* name;
    std::uint64_t IdentityComponents::*member;
  };
  static constexpr Component kComponents[] = {
      {"format", &IdentityComponents::format},    {"source", &IdentityComponents::source},
      {"names", &IdentityComponents::names},      {"options", &IdentityComponents::options},
      {"key", &IdentityComponents::key},          {"arch", &IdentityComponents::arch},
      {"compiler", &IdentityComponents::compiler}};

  std::vector<MissExplanation> explanations;
  for (const Program& program : programs) {
    const std::string version = compiler_version(program.language);
    const IdentityComponents wanted = identity_components(program, arch, version);
    const ProgramIdentity identity = identity_from_components(wanted);
    MissExplanation out;
    out.kernel = program.kernel_name;
    out.key = program.key_text;
    out.arch = std::string(arch);
    out.language = program.language;
    out.compiler_version = version;
    out.identity = identity.hex();
    if (const auto it = bad.find(identity); it != bad.end()) out.present_problem = it->second;

    auto distance = [&](const IdentityComponents& c) {
      std::size_t differing = 0;
      for (const Component& component : kComponents) {
        differing += c.*component.member != wanted.*component.member ? 1 : 0;
      }
      return differing;
    };
    // The nearest entry: fewest differing identity components; among equals, the key with
    // the fewest differing fields (every other key of the kernel differs in the component
    // "key" alike, so this is what tells the most similar key); then the most recently used.
    const std::map<std::string, std::string> wanted_fields = key_fields(program.key_text);
    const Candidate* nearest = nullptr;
    std::pair<std::size_t, std::size_t> nearest_distance;
    for (const Candidate& candidate : candidates) {
      if (candidate.identity == identity && !out.present) {
        out.present = true;
        out.present_layer = candidate.info.layer;
      }
      if (candidate.info.kernel != program.kernel_name) continue;
      ++out.same_kernel_entries;
      const std::pair<std::size_t, std::size_t> d{distance(candidate.components),
                                                  key_distance(wanted_fields, candidate.info.key)};
      if (nearest == nullptr || d < nearest_distance ||
          (d == nearest_distance && mtime_before(nearest->used, candidate.used))) {
        nearest = &candidate;
        nearest_distance = d;
      }
    }
    if (nearest != nullptr) {
      for (const Component& component : kComponents) {
        const std::uint64_t want = wanted.*component.member;
        const std::uint64_t found = nearest->components.*component.member;
        if (want == found) continue;
        IdentityDifference difference;
        difference.component = component.name;
        const std::string_view name = component.name;
        if (name == "format") {
          difference.wanted = "zerojit format " + std::to_string(kFormatVersion);
          difference.found = "zerojit format " + std::to_string(nearest->format_version);
        } else if (name == "key") {
          difference.wanted = program.key_text;
          difference.found = nearest->info.key;
        } else if (name == "arch") {
          difference.wanted = std::string(arch);
          difference.found = nearest->info.arch;
        } else if (name == "compiler") {
          difference.wanted = compiler_name(program.language) + " " + version;
          difference.found =
              compiler_name(nearest->info.language) + " " + nearest->info.compiler_version;
        } else {
          difference.wanted = hash_text(want);
          difference.found = hash_text(found);
        }
        out.differences.push_back(std::move(difference));
      }
      out.nearest = nearest->info;
    }
    explanations.push_back(std::move(out));
  }
  return explanations;
}

}  // namespace zerojit

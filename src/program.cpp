#include "zerojit/program.hpp"

#include <cstdio>
#include <string>

#include "zerojit/error.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace zerojit {
namespace {

// The quoted include of a line, if the line is an #include "..." directive.
std::string_view quoted_include(std::string_view line) {
  std::size_t i = line.find_first_not_of(" \t");
  if (i == std::string_view::npos || line[i] != '#') return {};
  i = line.find_first_not_of(" \t", i + 1);
  if (i == std::string_view::npos || line.compare(i, 7, "include") != 0) return {};
  i = line.find_first_not_of(" \t", i + 7);
  if (i == std::string_view::npos || line[i] != '"') return {};
  const std::size_t end = line.find('"', i + 1);
  if (end == std::string_view::npos) return {};
  return line.substr(i + 1, end - i - 1);
}

void collect_headers(const Program& program, std::string_view text,
                     std::vector<ResolvedHeader>& headers) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view name = quoted_include(text.substr(start, end - start));
    start = end + 1;
    if (name.empty()) continue;
    bool known = false;
    for (const auto& header : headers) known = known || header.path == name;
    if (known) continue;
    const EmbeddedFile* file = program.files->find(name);
    if (file == nullptr) {
      if (program.needs_toolkit_headers) continue;  // a CUDA toolkit header
      throw Error("kernel " + program.kernel_name + ": \"" + std::string(name) +
                  "\" is included but is not among the embedded kernel files");
    }
    headers.push_back({file->path, file->content});
    collect_headers(program, file->content, headers);
  }
}

// Hashes a sequence of strings unambiguously (each is length-prefixed).
class Hasher {
 public:
  Hasher() { XXH3_64bits_reset(&state_); }
  Hasher& add(std::string_view text) {
    const std::uint64_t length = text.size();
    XXH3_64bits_update(&state_, &length, sizeof length);
    XXH3_64bits_update(&state_, text.data(), text.size());
    return *this;
  }
  std::uint64_t digest() const { return XXH3_64bits_digest(&state_); }

 private:
  XXH3_state_t state_;
};

}  // namespace

ResolvedSource resolve_program_source(const Program& program) {
  if (program.files == nullptr) {
    throw Error("kernel " + program.kernel_name + ": program has no embedded file set");
  }
  const EmbeddedFile* source = program.files->find(program.source_path);
  if (source == nullptr) {
    throw Error("kernel " + program.kernel_name + ": source \"" + program.source_path +
                "\" is not among the embedded kernel files");
  }
  ResolvedSource resolved;
  resolved.source = source->content;
  collect_headers(program, source->content, resolved.headers);
  return resolved;
}

IdentityComponents identity_components(const Program& program, std::string_view arch,
                                       std::string_view compiler_version) {
  IdentityComponents components;
  components.format = Hasher().add("zerojit-format").add(std::to_string(kFormatVersion)).digest();
  components.kernel = Hasher().add(program.kernel_name).digest();
  Hasher source;
  const EntryKind& kind = entry_kind(program.language);
  if (kind.compiled_by_nvrtc) {
    const ResolvedSource resolved = resolve_program_source(program);
    source.add(program.source_path).add(resolved.source);
    for (const auto& header : resolved.headers) source.add(header.path).add(header.content);
    Hasher options;
    for (std::string_view option : kDefaultNvrtcOptions) options.add(option);
    options.add(program.needs_toolkit_headers ? "toolkit-headers" : "no-toolkit-headers");
    for (const auto& option : program.options) options.add(option);
    components.options = options.digest();
  } else {
    // Another language's source is hashed as its compiler is given it: every file, in order.
    if (program.files == nullptr || program.files->files().empty()) {
      throw Error("kernel " + program.kernel_name + ": a " + std::string(kind.name) +
                  " program has no source");
    }
    source.add(program.source_path);
    for (const EmbeddedFile& file : program.files->files()) source.add(file.path).add(file.content);
    components.options = language_options_component(kind, program.compile_request, program.options);
  }
  components.source = source.digest();
  Hasher names;
  for (const auto& expression : program.name_expressions) names.add(expression);
  components.names = names.digest();
  components.key = Hasher().add(program.key_text).digest();
  components.arch = Hasher().add(arch).digest();
  components.compiler = Hasher().add(compiler_version).digest();
  return components;
}

std::uint64_t language_options_component(const EntryKind& kind, std::string_view compile_request,
                                         const std::vector<std::string>& options) {
  Hasher hasher;
  hasher.add(kind.name).add(compile_request);
  for (const auto& option : options) hasher.add(option);
  return hasher.digest();
}

ProgramIdentity compute_identity(const Program& program, std::string_view arch,
                                 std::string_view compiler_version) {
  return identity_from_components(identity_components(program, arch, compiler_version));
}

ProgramIdentity identity_from_components(const IdentityComponents& c) {
  const std::uint64_t words[] = {c.format,  c.kernel, c.source, c.names,
                                 c.options, c.key,    c.arch,   c.compiler};
  const XXH128_hash_t hash = XXH3_128bits(words, sizeof words);
  ProgramIdentity identity;
  identity.words = {hash.high64, hash.low64};
  return identity;
}

std::string ProgramIdentity::hex() const {
  char buffer[33];
  std::snprintf(buffer, sizeof buffer, "%016llx%016llx", static_cast<unsigned long long>(words[0]),
                static_cast<unsigned long long>(words[1]));
  return buffer;
}

ProgramIdentity ProgramIdentity::from_hex(std::string_view hex) {
  if (hex.size() != 32)
    throw Error("an identity is 32 hex digits, got \"" + std::string(hex) + "\"");
  ProgramIdentity identity;
  for (std::size_t w = 0; w < 2; ++w) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < 16; ++i) {
      const char c = hex[w * 16 + i];
      int digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else {
        throw Error("an identity is 32 hex digits, got \"" + std::string(hex) + "\"");
      }
      value = value << 4 | static_cast<std::uint64_t>(digit);
    }
    identity.words[w] = value;
  }
  return identity;
}

}  // namespace zerojit

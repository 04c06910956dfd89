// What a compiler compiles for one key, and the content hash that identifies the result.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zerojit/embedded.hpp"
#include "zerojit/language.hpp"

namespace zerojit {

// Bumped whenever zerojit changes how it compiles or stores artifacts, so that no artifact of
// an older zerojit is ever taken for a current one.
inline constexpr int kFormatVersion = 1;

// Options every compile gets, before the program's own. Part of the identity.
inline constexpr std::string_view kDefaultNvrtcOptions[] = {"-std=c++17", "-default-device"};

struct Program {
  std::string kernel_name;                    // the owning kernel, for messages and identity
  const EmbeddedFileSet* files = nullptr;     // where the source and its includes resolve
  std::string source_path;                    // e.g. "dsv4/indexer_q_fp8.cu"
  std::vector<std::string> name_expressions;  // e.g. "zj::dsv4::indexer_q_fp8_kernel<128, 4>"
  std::vector<std::string> options;           // extra NVRTC options; the arch is added later
  std::string key_text;                       // describe(key), for messages and identity
  // Set when the source includes CUDA toolkit headers (<cuda_fp16.h>, ...): the compiler then
  // adds the toolkit's include directory. Their content is covered by the NVRTC version.
  bool needs_toolkit_headers = false;

  // For a language other than CUDA C++: `files` holds the kernel's source as its compiler sees
  // it (every file hashed as it is, no #include resolution), `name_expressions` the function,
  // and `compile_request` everything else the language's compiler needs for this key (Triton:
  // the signature, constexprs, attributes and options), opaque to the core and part of the
  // identity.
  Language language = kNvrtcLanguage;
  std::string compile_request;
};

// An embedded header a program includes, found by following #include "..." directives.
struct ResolvedHeader {
  std::string_view path;
  std::string_view content;
};

// The program's source and every embedded header it includes, directly or not, in first-seen
// order. Throws zerojit::Error naming the kernel and the missing file when a quoted include
// resolves to no embedded file (and the program does not use toolkit headers).
struct ResolvedSource {
  std::string_view source;
  std::vector<ResolvedHeader> headers;
};
ResolvedSource resolve_program_source(const Program& program);

// 128-bit content hash of everything that changes the compiled binary: zerojit's format
// version, the kernel name, the source and each included header (path and content), the name
// expressions, the options (and the language with its compile request), the key's text, the
// target arch and the compiler's version. It holds no absolute path, so a cache stays valid when
// the tree or the toolkit moves.
struct ProgramIdentity {
  std::array<std::uint64_t, 2> words{};

  std::string hex() const;                                // 32 lower-case hex digits
  static ProgramIdentity from_hex(std::string_view hex);  // throws zerojit::Error
  bool operator==(const ProgramIdentity&) const = default;
  auto operator<=>(const ProgramIdentity&) const = default;
};

ProgramIdentity compute_identity(const Program& program, std::string_view arch,
                                 std::string_view compiler_version);

// The identity's inputs, one hash each, so that a cache miss can say which part differs from
// its nearest neighbour (source, options, arch, compiler version, ...).
struct IdentityComponents {
  std::uint64_t format = 0;
  std::uint64_t kernel = 0;
  std::uint64_t source = 0;   // source + headers
  std::uint64_t names = 0;    // name expressions
  std::uint64_t options = 0;  // options, language and compile request
  std::uint64_t key = 0;
  std::uint64_t arch = 0;
  std::uint64_t compiler = 0;  // the compiler's version (NVRTC's, Triton's with its ptxas, ...)
  bool operator==(const IdentityComponents&) const = default;
};
IdentityComponents identity_components(const Program& program, std::string_view arch,
                                       std::string_view compiler_version);

// The identity that `components` hash into (compute_identity is this of identity_components).
// Lets a stored entry be checked for agreement between its identity and its components.
ProgramIdentity identity_from_components(const IdentityComponents& components);

// The `options` component of a program compiled by a language compiler (an entry kind not
// compiled_by_nvrtc): its language's name, its compile request and its options. A stored entry
// of such a kind carries the request, and this is how a reader checks that the request is the
// one its identity was made from.
std::uint64_t language_options_component(const EntryKind& kind, std::string_view compile_request,
                                         const std::vector<std::string>& options);

}  // namespace zerojit

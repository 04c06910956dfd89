// The kernel languages zerojit compiles, in one table (src/languages/table.cpp), and the trait
// every tier asks of a compiled entry: its *entry kind*. The tiers, the loader, the monitor and
// the tool ask what an entry is (does it hold host code? how does it load? how is it launched?
// is its launch record sound?) and never compare a language by value; a language is one folder,
// src/languages/<name>/, registered in that table (docs/ADDING_A_KERNEL.md, "Adding a kernel
// language").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace zerojit {

// The number is what a cache entry stores (docs/CACHE.md): never renumber a language.
enum class Language : std::uint8_t { cuda = 0, triton = 1, cutedsl = 2 };

// CUDA C++, the language the core compiles itself (NVRTC): a Program that names no other.
inline constexpr Language kNvrtcLanguage = Language::cuda;

// What an entry's image is, and so what loads it.
enum class ImageForm : std::uint8_t {
  cubin,        // a device image: cuModuleLoadData, then the entry function by its lowered name
  host_object,  // host machine code (an exported object): its language's host runtime loads it
};

// How a call of a loaded entry reaches the device.
enum class LaunchForm : std::uint8_t {
  plan,        // the kernel's plan owns the whole launch geometry (CUDA C++)
  recorded,    // the call gives the grid; block, shared memory, cluster and attributes come
               // from the launch record its compiler wrote (Triton)
  host_entry,  // the exported host entry computes its grid and launches itself (CuTeDSL)
};

struct CompiledArtifact;
struct LoadedFunction;
namespace languages {
class ArgumentPacker;
}

// The runtime of a language whose images are host objects: it loads an image (once per
// identity in a process) and runs its exported entry.
class HostObjectRuntime {
 public:
  virtual ~HostObjectRuntime() = default;
  // The entry `entry` of `artifact`'s image, loaded with `device`'s context current; throws
  // zerojit::Error (naming the kernel and key) or UnavailableError without the runtime.
  virtual void* load(const CompiledArtifact& artifact, std::string_view entry) = 0;
  // Runs a loaded entry with its argument pointers, in order; throws naming the failure.
  virtual void run(void* entry, void** args, std::size_t count) const = 0;
  // Where the runtime library is looked for first (an installed package's copy); the file
  // that would be (or was) loaded.
  virtual void set_library(std::string path) = 0;
  virtual std::string library() const = 0;
};

struct EntryKind {
  Language language{};
  std::string_view name;      // "cuda", "triton", "cutedsl": listings, --json, version records
  std::string_view compiler;  // "NVRTC", "Triton", "CuTeDSL": in messages
  // CUDA C++ the core compiles with NVRTC: its identity follows #include "..." into embedded
  // headers and names NVRTC's version. Every other kind is compiled by a LanguageCompiler the
  // Python module installs (runtime.hpp), from its files as given.
  bool compiled_by_nvrtc = false;
  // The image runs on the host when loaded: it is loaded only from files nobody else can write
  // (docs/CACHE.md, "Host code"), and crosses the remote tier only where the deployment says so.
  bool holds_host_code = false;
  ImageForm image = ImageForm::cubin;
  LaunchForm launch = LaunchForm::plan;
  // The runtime of host_object images; nullptr for cubins.
  HostObjectRuntime* (*host_runtime)() = nullptr;

  // The entry's launch record, decoded whole and checked against the compile request its
  // identity was made from (the parameter list, the flags the options set, the export's prefix
  // and versions): "" when sound, else what is wrong, in a sentence. Every load and `cache
  // verify` ask it; a kind without records calls any record malformed.
  std::string (*check_record)(const CompiledArtifact& artifact) = nullptr;
  // What the entry fixes about its launch, in words, for `zerojit cache ls --long` ("block 128,
  // shared 0 B, PDL, params *fp32 *fp32 i32 fp32 + 2 scratch"); called on sound entries only.
  std::string (*describe_launch)(const CompiledArtifact& artifact) = nullptr;
  // Sets what the record fixes on a function just loaded (block, shared memory, cluster,
  // trailing null parameters, launch attributes); nullptr for kinds whose plan or host entry
  // decides. Throws zerojit::Error for a record zerojit cannot launch.
  void (*adopt_record)(const CompiledArtifact& artifact, LoadedFunction& function) = nullptr;

  // The argument packer of a kernel of this language defined in Python: the one language-specific
  // step of their call path (src/languages/packer.hpp; python/src/kernel_call.cpp).
  std::unique_ptr<languages::ArgumentPacker> (*make_packer)(std::string_view kernel) = nullptr;
};

// The kind of a language's entries.
const EntryKind& entry_kind(Language language);
// The kind a stored language number names, or nullptr (an entry of a language this zerojit
// does not know).
const EntryKind* find_entry_kind(std::uint32_t stored);
// Every kind, in the table's order.
std::span<const EntryKind* const> entry_kinds();

// "cuda" | "triton" | "cutedsl".
std::string_view to_string(Language language);
// The language of a name; std::nullopt otherwise.
std::optional<Language> parse_language(std::string_view text);

}  // namespace zerojit

// NVRTC, loaded at run time: compiles a Program into a cubin for an explicit target
// architecture. Works on a machine without a GPU (ahead-of-time compiling for a named arch).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "zerojit/program.hpp"

namespace zerojit {

struct LoweredName {
  std::string expression;  // as the program named it, e.g. "zj::add<128>"
  std::string lowered;     // the mangled symbol to look up in the module
};

// Where an artifact came from when it was asked for.
enum class ArtifactOrigin { memory, disk, compiled };
std::string_view to_string(ArtifactOrigin origin);

// The result of compiling one program for one arch.
struct CompiledArtifact {
  ProgramIdentity identity;
  IdentityComponents components;       // what went into the identity (for explaining misses)
  Language language = kNvrtcLanguage;  // its entry kind (language.hpp): what `cubin` is, how it
                                       // loads and launches
  std::string kernel_name;
  std::string key_text;
  std::string arch;
  std::string compiler_version;  // NVRTC's "13.0"; Triton's "triton-3.6.0+ptxas-12.8"
  // The binary image: a cubin (CUDA C++, Triton), an exported host object (CuTeDSL).
  std::string cubin;
  std::vector<LoweredName> lowered_names;
  // How the compiler fixed the launch (its entry kind reads and checks it; empty for CUDA C++,
  // whose plan owns its launch).
  std::string launch_record;
  // What a language compiler was asked (Program::compile_request) and the program's options,
  // kept so that a reader can check the record against the request its identity was made from
  // (EntryKind::check_record); empty for CUDA C++.
  std::string compile_request;
  std::vector<std::string> program_options;
  double compile_seconds = 0.0;
  std::string log;  // the compiler's log (warnings) of a successful compile

  // The lowered name of an expression; throws zerojit::Error if the program had none such.
  const std::string& lowered(std::string_view expression) const;
};

// Whether NVRTC can be loaded (never throws), and why not.
bool nvrtc_available();
std::string nvrtc_unavailable_reason();

// "13.0". Loads NVRTC (throws UnavailableError without it).
std::string nvrtc_version();
// Whether this process has loaded NVRTC yet (the disk tier must not need to).
bool nvrtc_loaded();

// The NVRTC library file this process would load (without loading it); empty if none found.
// Search order: $ZEROJIT_NVRTC_LIBRARY, the dynamic loader's path, then lib64/ under
// $CUDA_HOME, $CUDA_PATH, the toolkit of the nvcc on PATH, /usr/local/cuda.
std::string nvrtc_library_path();

// The CUDA toolkit's include directory, searched in $CUDA_HOME, $CUDA_PATH, the nvcc on PATH,
// /usr/local/cuda. Throws UnavailableError listing the places it looked.
std::string cuda_include_dir();

// Checks an arch name ("sm_90a", "sm_100a", "sm_89", ...); throws zerojit::Error otherwise.
void validate_arch(std::string_view arch);

// The archs this process's NVRTC compiles for (90 for sm_90, ascending as NVRTC lists them);
// empty without NVRTC, or with one too old to say. Never throws.
std::vector<int> nvrtc_supported_archs();
// validate_arch, and, where NVRTC says what it supports, that it compiles for `arch` (sm_90a's
// number is 90); throws zerojit::Error naming the range otherwise. Warmup checks each arch so
// before compiling anything, so an unsupported arch is one error, not one a key.
void check_arch_supported(std::string_view arch);

// The two halves of compile_program, apart so that a worker process can run NVRTC on input
// prepared here (compile_pool.hpp). NvrtcInput holds everything NVRTC reads: the source and
// every header by content, the full option list (defaults, arch, program options).
struct NvrtcInput {
  std::string kernel_name;  // for messages
  std::string key_text;     // for messages
  std::string arch;
  std::string source_path;
  std::string source;
  std::vector<std::string> header_names;
  std::vector<std::string> header_texts;
  std::vector<std::string> name_expressions;
  std::vector<std::string> options;
};

struct NvrtcOutput {
  std::string cubin;
  std::vector<LoweredName> lowered_names;
  std::string log;
  double compile_seconds = 0.0;
  std::string nvrtc_version;
};

// Resolves the program's sources and builds its option list (validates the arch).
NvrtcInput make_nvrtc_input(const Program& program, std::string_view arch);
// Compiles in this process; throws CompileError (with NVRTC's log) or Error.
NvrtcOutput run_nvrtc(const NvrtcInput& input);

// Where NVRTC runs: an interface so that warmup can send compiles to worker processes
// (CompileProcessPool, compile_pool.hpp) while everything else stays in this process. The
// Runtime holds the one in use (Runtime::compile_executor); none means this process.
class CompileExecutor {
 public:
  virtual ~CompileExecutor() = default;
  // Throws what run_nvrtc throws.
  virtual NvrtcOutput run(const NvrtcInput& input) = 0;
};

// Compiles for `arch`, through `executor` (nullptr: in this process). Throws CompileError
// (kernel, key and NVRTC log) when NVRTC rejects the program, UnavailableError without NVRTC.
// `identity` must be compute_identity(program, arch, nvrtc_version()); the caller computed it
// already, so it is passed in.
CompiledArtifact compile_program(const Program& program, std::string_view arch,
                                 const ProgramIdentity& identity,
                                 CompileExecutor* executor = nullptr);

}  // namespace zerojit

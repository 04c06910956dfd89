#include "zerojit/compiler.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>

#include "environment.hpp"
#include "zerojit/error.hpp"

namespace zerojit {
namespace {

namespace fs = std::filesystem;

using NvrtcResult = int;
using NvrtcProgram = struct _nvrtcProgram*;

struct NvrtcApi {
  NvrtcResult (*nvrtcVersion)(int* major, int* minor);
  const char* (*nvrtcGetErrorString)(NvrtcResult result);
  NvrtcResult (*nvrtcCreateProgram)(NvrtcProgram* program, const char* source, const char* name,
                                    int header_count, const char* const* headers,
                                    const char* const* include_names);
  NvrtcResult (*nvrtcDestroyProgram)(NvrtcProgram* program);
  NvrtcResult (*nvrtcCompileProgram)(NvrtcProgram program, int option_count,
                                     const char* const* options);
  NvrtcResult (*nvrtcGetProgramLogSize)(NvrtcProgram program, std::size_t* size);
  NvrtcResult (*nvrtcGetProgramLog)(NvrtcProgram program, char* log);
  NvrtcResult (*nvrtcGetCUBINSize)(NvrtcProgram program, std::size_t* size);
  NvrtcResult (*nvrtcGetCUBIN)(NvrtcProgram program, char* cubin);
  NvrtcResult (*nvrtcAddNameExpression)(NvrtcProgram program, const char* expression);
  NvrtcResult (*nvrtcGetLoweredName)(NvrtcProgram program, const char* expression,
                                     const char** lowered);
  // Optional (since CUDA 11.2): the archs this NVRTC compiles for.
  NvrtcResult (*nvrtcGetNumSupportedArchs)(int* count);
  NvrtcResult (*nvrtcGetSupportedArchs)(int* archs);
};

constexpr NvrtcResult kNvrtcSuccess = 0;
constexpr NvrtcResult kNvrtcCompilationError = 6;

// A variable that names a place explicitly and points nowhere is an error, not a hint to skip:
// the search would otherwise quietly find another toolkit (or none) than the one asked for.
std::optional<std::string> explicit_variable_problem() {
  std::error_code ec;
  if (const char* library = detail::environment_text("ZEROJIT_NVRTC_LIBRARY")) {
    if (!fs::is_regular_file(library, ec)) {
      return std::string("ZEROJIT_NVRTC_LIBRARY=") + library +
             " is not a file; point it to libnvrtc.so.13 or unset it";
    }
  }
  if (const char* home = detail::environment_text("CUDA_HOME")) {
    if (!fs::is_directory(home, ec)) {
      return std::string("CUDA_HOME=") + home +
             " is not a directory; point it to the CUDA toolkit's root or unset it";
    }
  }
  return std::nullopt;
}

// Toolkit roots in the documented order: $CUDA_HOME, $CUDA_PATH, the nvcc on PATH,
// /usr/local/cuda.
std::vector<fs::path> toolkit_roots() {
  std::vector<fs::path> roots;
  if (const char* home = detail::environment_text("CUDA_HOME")) roots.emplace_back(home);
  if (const char* path = detail::environment_text("CUDA_PATH")) roots.emplace_back(path);
  if (const char* search = detail::environment_text("PATH")) {
    std::string_view rest(search);
    while (!rest.empty()) {
      const std::size_t colon = rest.find(':');
      const fs::path dir(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
      std::error_code ec;
      const fs::path nvcc = dir / "nvcc";
      if (!dir.empty() && fs::exists(nvcc, ec)) {
        const fs::path real = fs::weakly_canonical(nvcc, ec);
        roots.push_back((ec ? nvcc : real).parent_path().parent_path());
        break;
      }
    }
  }
  roots.emplace_back("/usr/local/cuda");
  return roots;
}

constexpr const char* kNvrtcSonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

struct NvrtcState {
  NvrtcApi api{};
  bool loaded = false;
  std::string reason;
  std::string version;
  std::vector<int> supported_archs;  // 90 for sm_90; empty when NVRTC cannot say
};

template <class Fn>
bool resolve(void* library, Fn& slot, const char* name, std::string& reason) {
  slot = reinterpret_cast<Fn>(dlsym(library, name));
  if (slot == nullptr) reason = std::string("NVRTC lacks ") + name;
  return slot != nullptr;
}

// ZEROJIT_NVRTC_DISABLE=1: behave as on a host without NVRTC, although one is installed (the
// loader's cache would find it whatever the environment says). Tests use it to prove that an
// ahead-of-time pack serves alone.
bool nvrtc_disabled() { return detail::environment_flag("ZEROJIT_NVRTC_DISABLE"); }

NvrtcState load_nvrtc() {
  NvrtcState state;
  if (nvrtc_disabled()) {
    state.reason = std::string("NVRTC is disabled (ZEROJIT_NVRTC_DISABLE=") +
                   detail::environment_text("ZEROJIT_NVRTC_DISABLE") + ")";
    return state;
  }
  if (auto problem = explicit_variable_problem()) {
    state.reason = "NVRTC not loaded: " + *problem;
    return state;
  }
  void* library = nullptr;
  const std::string path = nvrtc_library_path();
  if (!path.empty()) library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr && detail::environment_text("ZEROJIT_NVRTC_LIBRARY") != nullptr) {
    const char* error = dlerror();
    state.reason = std::string("NVRTC not loaded: ZEROJIT_NVRTC_LIBRARY=") + path +
                   " cannot be loaded (" + (error ? error : "unknown error") +
                   "); point it to libnvrtc.so.13 or unset it";
    return state;
  }
  for (const char* soname : kNvrtcSonames) {
    if (library == nullptr) library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  }
  if (library == nullptr) {
    state.reason =
        "NVRTC not found: looked for libnvrtc.so.13 in $ZEROJIT_NVRTC_LIBRARY, lib64/ of "
        "$CUDA_HOME, $CUDA_PATH, the nvcc on PATH and /usr/local/cuda, and on the loader path; "
        "install the CUDA toolkit (or set CUDA_HOME), or use an ahead-of-time pack";
    return state;
  }
  NvrtcApi& a = state.api;
  std::string& r = state.reason;
  const bool ok = resolve(library, a.nvrtcVersion, "nvrtcVersion", r) &&
                  resolve(library, a.nvrtcGetErrorString, "nvrtcGetErrorString", r) &&
                  resolve(library, a.nvrtcCreateProgram, "nvrtcCreateProgram", r) &&
                  resolve(library, a.nvrtcDestroyProgram, "nvrtcDestroyProgram", r) &&
                  resolve(library, a.nvrtcCompileProgram, "nvrtcCompileProgram", r) &&
                  resolve(library, a.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", r) &&
                  resolve(library, a.nvrtcGetProgramLog, "nvrtcGetProgramLog", r) &&
                  resolve(library, a.nvrtcGetCUBINSize, "nvrtcGetCUBINSize", r) &&
                  resolve(library, a.nvrtcGetCUBIN, "nvrtcGetCUBIN", r) &&
                  resolve(library, a.nvrtcAddNameExpression, "nvrtcAddNameExpression", r) &&
                  resolve(library, a.nvrtcGetLoweredName, "nvrtcGetLoweredName", r);
  if (!ok) return state;
  int major = 0, minor = 0;
  if (a.nvrtcVersion(&major, &minor) != kNvrtcSuccess) {
    state.reason = "nvrtcVersion failed";
    return state;
  }
  state.version = std::to_string(major) + "." + std::to_string(minor);
  state.loaded = true;
  a.nvrtcGetNumSupportedArchs = reinterpret_cast<decltype(a.nvrtcGetNumSupportedArchs)>(
      dlsym(library, "nvrtcGetNumSupportedArchs"));
  a.nvrtcGetSupportedArchs = reinterpret_cast<decltype(a.nvrtcGetSupportedArchs)>(
      dlsym(library, "nvrtcGetSupportedArchs"));
  int count = 0;
  if (a.nvrtcGetNumSupportedArchs != nullptr && a.nvrtcGetSupportedArchs != nullptr &&
      a.nvrtcGetNumSupportedArchs(&count) == kNvrtcSuccess && count > 0 && count < 1024) {
    state.supported_archs.resize(static_cast<std::size_t>(count));
    if (a.nvrtcGetSupportedArchs(state.supported_archs.data()) != kNvrtcSuccess) {
      state.supported_archs.clear();
    }
  }
  return state;
}

std::once_flag nvrtc_once;
// Set once, never freed: NVRTC stays loaded for the life of the process.
std::atomic<const NvrtcState*> nvrtc_state_ptr{nullptr};

const NvrtcState& nvrtc_state() {
  std::call_once(nvrtc_once, [] {
    nvrtc_state_ptr.store(new NvrtcState(load_nvrtc()), std::memory_order_release);
  });
  return *nvrtc_state_ptr.load(std::memory_order_acquire);
}

const NvrtcApi& nvrtc() {
  const NvrtcState& state = nvrtc_state();
  if (!state.loaded) throw UnavailableError(state.reason);
  return state.api;
}

void check_nvrtc(NvrtcResult result, const char* call) {
  if (result == kNvrtcSuccess) return;
  throw Error(std::string(call) + " failed: " + nvrtc().nvrtcGetErrorString(result));
}

// Releases an NVRTC program on every path out of compile_program.
struct ProgramHandle {
  NvrtcProgram program = nullptr;
  ~ProgramHandle() {
    if (program != nullptr) nvrtc().nvrtcDestroyProgram(&program);
  }
};

std::string program_log(NvrtcProgram program) {
  std::size_t size = 0;
  if (nvrtc().nvrtcGetProgramLogSize(program, &size) != kNvrtcSuccess || size <= 1) return {};
  std::string log(size, '\0');
  nvrtc().nvrtcGetProgramLog(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

}  // namespace

std::string_view to_string(ArtifactOrigin origin) {
  switch (origin) {
    case ArtifactOrigin::memory:
      return "memory";
    case ArtifactOrigin::disk:
      return "disk";
    case ArtifactOrigin::compiled:
      return "compiled";
  }
  return "?";
}

const std::string& CompiledArtifact::lowered(std::string_view expression) const {
  for (const auto& name : lowered_names) {
    if (name.expression == expression) return name.lowered;
  }
  throw Error("kernel " + kernel_name + " [" + key_text + "]: the artifact has no function for \"" +
              std::string(expression) + "\"");
}

bool nvrtc_available() { return nvrtc_state().loaded; }
std::string nvrtc_unavailable_reason() { return nvrtc_state().reason; }
bool nvrtc_loaded() {
  const NvrtcState* state = nvrtc_state_ptr.load(std::memory_order_acquire);
  return state != nullptr && state->loaded;
}

std::string nvrtc_version() {
  nvrtc();
  return nvrtc_state().version;
}

std::vector<int> nvrtc_supported_archs() {
  const NvrtcState& state = nvrtc_state();
  return state.loaded ? state.supported_archs : std::vector<int>{};
}

void check_arch_supported(std::string_view arch) {
  validate_arch(arch);
  const std::vector<int> supported = nvrtc_supported_archs();
  if (supported.empty()) return;  // no NVRTC, or one that cannot say: the compile will tell
  std::string_view digits = arch.substr(3);
  while (!digits.empty() && (digits.back() < '0' || digits.back() > '9')) digits.remove_suffix(1);
  int number = 0;
  for (char c : digits) number = number * 10 + (c - '0');
  if (std::find(supported.begin(), supported.end(), number) != supported.end()) return;
  const auto [lowest, highest] = std::minmax_element(supported.begin(), supported.end());
  throw Error("NVRTC " + nvrtc_state().version + " cannot compile for " + std::string(arch) +
              ": it compiles for sm_" + std::to_string(*lowest) + " to sm_" +
              std::to_string(*highest) + " (" + std::to_string(supported.size()) +
              " archs); name one of them, or use a newer CUDA toolkit");
}

std::string nvrtc_library_path() {
  if (nvrtc_disabled()) return {};
  std::error_code ec;
  if (explicit_variable_problem()) return {};
  if (const char* explicit_path = detail::environment_text("ZEROJIT_NVRTC_LIBRARY"))
    return explicit_path;
  for (const fs::path& root : toolkit_roots()) {
    for (const char* soname : kNvrtcSonames) {
      for (const char* lib : {"lib64", "lib"}) {
        const fs::path candidate = root / lib / soname;
        if (fs::exists(candidate, ec)) return candidate.string();
      }
    }
  }
  return {};
}

std::string cuda_include_dir() {
  if (auto problem = explicit_variable_problem()) {
    throw UnavailableError("CUDA headers not searched: " + *problem);
  }
  std::string tried;
  std::error_code ec;
  for (const fs::path& root : toolkit_roots()) {
    const fs::path include = root / "include";
    if (fs::exists(include / "cuda.h", ec)) return include.string();
    tried += (tried.empty() ? "" : ", ") + include.string();
  }
  throw UnavailableError(
      "CUDA headers not found (looked in $CUDA_HOME, $CUDA_PATH, the nvcc on PATH and "
      "/usr/local/cuda: " +
      tried + "); set CUDA_HOME to the toolkit's root");
}

void validate_arch(std::string_view arch) {
  bool ok = arch.size() >= 5 && arch.substr(0, 3) == "sm_";
  std::size_t i = 3;
  while (ok && i < arch.size() && arch[i] >= '0' && arch[i] <= '9') ++i;
  ok = ok && i >= 5;  // at least two digits
  if (ok && i < arch.size()) ok = i + 1 == arch.size() && (arch[i] == 'a' || arch[i] == 'f');
  if (!ok) {
    throw Error("unknown target arch \"" + std::string(arch) +
                "\": name a real architecture such as sm_90a (H100/H200) or sm_100a (B200)");
  }
}

NvrtcInput make_nvrtc_input(const Program& program, std::string_view arch) {
  validate_arch(arch);
  const ResolvedSource resolved = resolve_program_source(program);
  NvrtcInput input;
  input.kernel_name = program.kernel_name;
  input.key_text = program.key_text;
  input.arch = std::string(arch);
  input.source_path = program.source_path;
  input.source = std::string(resolved.source);
  for (const auto& header : resolved.headers) {
    input.header_names.emplace_back(header.path);
    input.header_texts.emplace_back(header.content);
  }
  input.name_expressions = program.name_expressions;
  input.options.assign(std::begin(kDefaultNvrtcOptions), std::end(kDefaultNvrtcOptions));
  input.options.push_back("--gpu-architecture=" + std::string(arch));
  if (program.needs_toolkit_headers) input.options.push_back("-I" + cuda_include_dir());
  input.options.insert(input.options.end(), program.options.begin(), program.options.end());
  return input;
}

NvrtcOutput run_nvrtc(const NvrtcInput& input) {
  const NvrtcApi& api = nvrtc();
  check_arch_supported(input.arch);  // NVRTC's own error is an option error in a long log
  std::vector<const char*> header_pointers, name_pointers, option_pointers;
  for (std::size_t i = 0; i < input.header_texts.size(); ++i) {
    header_pointers.push_back(input.header_texts[i].c_str());
    name_pointers.push_back(input.header_names[i].c_str());
  }
  for (const auto& option : input.options) option_pointers.push_back(option.c_str());

  const auto start = std::chrono::steady_clock::now();
  ProgramHandle handle;
  check_nvrtc(
      api.nvrtcCreateProgram(&handle.program, input.source.c_str(), input.source_path.c_str(),
                             static_cast<int>(header_pointers.size()), header_pointers.data(),
                             name_pointers.data()),
      "nvrtcCreateProgram");
  for (const auto& expression : input.name_expressions) {
    check_nvrtc(api.nvrtcAddNameExpression(handle.program, expression.c_str()),
                "nvrtcAddNameExpression");
  }
  const NvrtcResult result = api.nvrtcCompileProgram(
      handle.program, static_cast<int>(option_pointers.size()), option_pointers.data());
  std::string log = program_log(handle.program);
  if (result != kNvrtcSuccess) {
    std::string message = "NVRTC could not compile kernel " + input.kernel_name + " [" +
                          input.key_text + "] for " + input.arch + " (" +
                          api.nvrtcGetErrorString(result) + ")";
    if (result == kNvrtcCompilationError && !log.empty()) message += ":\n" + log;
    throw CompileError(input.kernel_name, input.key_text, log, message);
  }

  NvrtcOutput output;
  output.log = std::move(log);
  std::size_t cubin_size = 0;
  check_nvrtc(api.nvrtcGetCUBINSize(handle.program, &cubin_size), "nvrtcGetCUBINSize");
  output.cubin.resize(cubin_size);
  check_nvrtc(api.nvrtcGetCUBIN(handle.program, output.cubin.data()), "nvrtcGetCUBIN");
  for (const auto& expression : input.name_expressions) {
    const char* lowered = nullptr;
    check_nvrtc(api.nvrtcGetLoweredName(handle.program, expression.c_str(), &lowered),
                "nvrtcGetLoweredName");
    output.lowered_names.push_back({expression, lowered});
  }
  output.compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  output.nvrtc_version = nvrtc_version();
  return output;
}

static CompiledArtifact assemble_artifact(const Program& program, std::string_view arch,
                                          const ProgramIdentity& identity, NvrtcOutput output) {
  CompiledArtifact artifact;
  artifact.identity = identity;
  artifact.components = identity_components(program, arch, output.nvrtc_version);
  artifact.kernel_name = program.kernel_name;
  artifact.key_text = program.key_text;
  artifact.arch = std::string(arch);
  artifact.compiler_version = std::move(output.nvrtc_version);
  artifact.log = std::move(output.log);
  artifact.cubin = std::move(output.cubin);
  artifact.lowered_names = std::move(output.lowered_names);
  artifact.compile_seconds = output.compile_seconds;
  return artifact;
}

CompiledArtifact compile_program(const Program& program, std::string_view arch,
                                 const ProgramIdentity& identity, CompileExecutor* executor) {
  NvrtcInput input = make_nvrtc_input(program, arch);
  NvrtcOutput output = executor != nullptr ? executor->run(input) : run_nvrtc(input);
  return assemble_artifact(program, arch, identity, std::move(output));
}

}  // namespace zerojit

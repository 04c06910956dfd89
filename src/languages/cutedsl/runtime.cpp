#include "languages/cutedsl/runtime.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "environment.hpp"
#include "zerojit/error.hpp"

namespace zerojit::cutedsl {
namespace {

constexpr const char* kLibraryName = "libcute_dsl_runtime.so";

struct State {
  std::mutex mutex;
  std::string configured;  // set_runtime_library
  std::string loaded_from;
  std::unique_ptr<RuntimeApi> api;  // set once loaded, never replaced
};

State& state() {
  static State* instance = new State();  // alive for every load and call until exit
  return *instance;
}

template <class Fn>
bool resolve(void* library, Fn& slot, const char* name) {
  slot = reinterpret_cast<Fn>(dlsym(library, name));
  return slot != nullptr;
}

// The candidates in order: $ZEROJIT_CUTE_DSL_RUNTIME, the configured path, the loader's search.
std::vector<std::string> candidates(const std::string& configured) {
  std::vector<std::string> out;
  if (const char* variable = detail::environment_text("ZEROJIT_CUTE_DSL_RUNTIME")) {
    out.emplace_back(variable);
  }
  if (!configured.empty()) out.push_back(configured);
  out.emplace_back(kLibraryName);
  return out;
}

}  // namespace

void set_runtime_library(std::string path) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.configured = std::move(path);
}

std::string runtime_library() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.api) return s.loaded_from;
  return candidates(s.configured).front();
}

const RuntimeApi& runtime() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.api) return *s.api;
  std::string tried;
  for (const std::string& candidate : candidates(s.configured)) {
    void* library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* error = dlerror();
      tried += "\n  " + candidate + ": " + (error ? error : "cannot be loaded");
      continue;
    }
    auto api = std::make_unique<RuntimeApi>();
    if (resolve(library, api->create_module, "CuteDSLRT_Module_Create_From_Bytes") &&
        resolve(library, api->get_function, "CuteDSLRT_Module_Get_Function") &&
        resolve(library, api->run, "CuteDSLRT_Function_Run") &&
        resolve(library, api->error_name, "CuteDSLRT_GetErrorName")) {
      s.loaded_from = candidate;
      s.api = std::move(api);
      return *s.api;
    }
    tried += "\n  " + candidate + ": not the CuTeDSL runtime (a CuteDSLRT_ function is missing)";
  }
  throw UnavailableError(
      "the CuTeDSL runtime (libcute_dsl_runtime.so, in the nvidia-cutlass-dsl-libs-cu12 or -cu13 "
      "wheel) cannot be loaded, which running a CuTeDSL kernel needs; set "
      "ZEROJIT_CUTE_DSL_RUNTIME to it. Tried:" +
      tried);
}

void check(int result, const std::string& what) {
  if (result == 0) return;
  const RuntimeApi& api = runtime();
  const char* name = api.error_name != nullptr ? api.error_name(result) : nullptr;
  throw Error(what + " failed in the CuTeDSL runtime: " + (name ? name : "error") + " (" +
              std::to_string(result) + ")");
}

}  // namespace zerojit::cutedsl

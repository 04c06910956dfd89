// NVIDIA's CuTeDSL runtime library (libcute_dsl_runtime.so, shipped in the
// nvidia-cutlass-dsl-libs-cu12 / -cu13 wheels), loaded at run time like the CUDA driver: it loads
// the host objects that CuTeDSL exports (`export_to_c`) and runs their entry functions. zerojit
// declares the four functions it calls itself (their signatures are the runtime's documented C
// API) and links nothing, so the library and the tool start without it; only a CuTeDSL kernel's
// load needs it, and says where it looked when it is missing.
#pragma once

#include <cstddef>
#include <string>

namespace zerojit::cutedsl {

struct RuntimeApi {
  // CuteDSLRT_Module_Create_From_Bytes(module, bytes, size, shared libraries, count)
  int (*create_module)(void** module, const unsigned char* bytes, std::size_t size,
                       const char** shared_libraries, std::size_t count);
  // CuteDSLRT_Module_Get_Function(function, module, function prefix): loads the CUDA module.
  int (*get_function)(void** function, void* module, const char* prefix);
  // CuteDSLRT_Function_Run(function, args, count): the exported host entry.
  int (*run)(void* function, void** args, std::size_t count);
  const char* (*error_name)(int error);
};

// Where the runtime is looked for first: the Python module points it at the copy in the
// installed wheel. $ZEROJIT_CUTE_DSL_RUNTIME comes before it, the dynamic loader's search path
// after it.
void set_runtime_library(std::string path);
// The library file that would be (or was) loaded; empty when none is known yet.
std::string runtime_library();

// The loaded runtime; throws UnavailableError naming the places it looked when it is missing.
const RuntimeApi& runtime();

// Throws CudaError-like zerojit::Error naming `what` and the runtime's error name unless
// `result` is success (0).
void check(int result, const std::string& what);

}  // namespace zerojit::cutedsl

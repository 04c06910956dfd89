// Entries of the languages compiled outside the core (Triton, CuTeDSL) as their compilers make
// them: a sound launch record that agrees with the compile request its identity was made from
// (the request's four-parameter signature with PDL on; the export's prefix and DSL version).
// For the cache's tests and the cache-entry fuzzer's seeds; header-only, no test framework.
#pragma once

#include <string>

#include "zerojit/cache_entry.hpp"
#include "zerojit/program.hpp"

namespace zerojit::test {

// The Triton compile request of synthetic_language_artifact (`variant` picks BLOCK), and the
// launch record that answers it.
inline std::string synthetic_triton_request(int variant) {
  return R"({"signature":{"x":"*fp32","y":"*fp32","n":"i32","a":"fp32","BLOCK":"constexpr"},)"
         R"("constexprs":{"BLOCK":)" +
         std::to_string(64 << variant) +
         R"(},"divisible":["x","y"],"options":{"launch_pdl":true,"num_warps":4}})";
}

inline std::string synthetic_triton_record() {
  return R"({"entry":"masked_add","block_threads":128,"shared_bytes":0,"cluster_ctas":1,)"
         R"("programmatic_serialization":true,"cooperative":false,)"
         R"("params":["*fp32","*fp32","i32","fp32"],"scratch_pointers":2,)"
         R"("global_scratch_bytes":0,"profile_scratch_bytes":0,"tensor_descriptors":0})";
}

inline CompiledArtifact synthetic_language_artifact(Language language, int variant = 0) {
  static const EmbeddedFile source[] = {{"mylib.kernels:masked_add", "def masked_add(): pass\n"}};
  static const EmbeddedFileSet files{source};
  const bool triton = language == Language::triton;
  const std::string prefix = "zj_prefix" + std::to_string(variant);
  Program program;
  program.kernel_name = triton ? "mylib.masked_add" : "mylib.cute_add";
  program.language = language;
  program.files = &files;
  program.source_path = source[0].path;
  program.name_expressions = {"masked_add"};
  program.key_text = "variant=" + std::to_string(variant);
  program.compile_request =
      triton ? synthetic_triton_request(variant) : R"({"prefix":")" + prefix + R"("})";
  const std::string version = triton ? "triton-3.6.0+ptxas-12.8.93" : "cutedsl-4.8.1";
  CompiledArtifact artifact;
  artifact.language = language;
  artifact.components = identity_components(program, "sm_90a", version);
  artifact.identity = identity_from_components(artifact.components);
  artifact.kernel_name = program.kernel_name;
  artifact.key_text = program.key_text;
  artifact.arch = "sm_90a";
  artifact.compiler_version = version;
  artifact.compile_request = program.compile_request;
  artifact.cubin = "IMAGE of " + program.key_text + " exporting " + prefix;
  artifact.lowered_names = {{"masked_add", triton ? "masked_add" : prefix}};
  artifact.launch_record = triton ? synthetic_triton_record()
                                  : R"({"prefix":")" + prefix +
                                        R"(","dsl_version":"4.8.1","abi":"cute-dsl-export-c-1"})";
  return artifact;
}

}  // namespace zerojit::test

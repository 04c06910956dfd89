// A stand-in for the Python module's Triton compiler and a kernel of its language, without
// Python: the compiler answers a version and makes an "image" with a sound launch record; the
// kernel's program asks for what that record answers. For the core's tests of other languages.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "languages/triton/launch_record.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::testing {

inline languages::LaunchRecord sample_record() {
  languages::LaunchRecord record;
  record.entry = "masked_add";
  record.block_threads = 128;
  record.shared_bytes = 0;
  record.cluster_ctas = 2;
  record.programmatic_serialization = true;
  record.params = {"*fp32", "*fp32", "i32", "fp32"};
  record.scratch_pointers = 2;
  return record;
}

// What the Python module's Triton compiler does, without Python: a version, and an "image".
class FakeTritonCompiler final : public LanguageCompiler {
 public:
  explicit FakeTritonCompiler(std::string version) : version_(std::move(version)) {}
  std::string version(std::string_view) override {
    if (version_.empty()) throw UnavailableError("Triton is not installed (fake)");
    return version_;
  }
  CompiledArtifact compile(const Program& program, std::string_view) override {
    ++compiles;
    CompiledArtifact artifact;
    artifact.cubin = "IMAGE:" + program.compile_request;
    artifact.lowered_names = {{program.name_expressions.front(), "masked_add"}};
    artifact.launch_record = languages::encode_launch_record(sample_record());
    return artifact;
  }
  std::atomic<int> compiles{0};

 private:
  std::string version_;
};

struct BlockKey {
  int block = 256;
  static constexpr auto fields() { return std::tuple{field("block", &BlockKey::block)}; }
  auto operator<=>(const BlockKey&) const = default;
};
struct NoDescriptors {
  int unused = 0;
  static constexpr auto fields() { return std::tuple{field("unused", &NoDescriptors::unused)}; }
};

// A "Triton" kernel whose source text holds an #include line: another language's source is
// hashed as it is, never resolved as CUDA C++ would be.
inline constexpr EmbeddedFile kSource[] = {
    {"mylib.kernels:masked_add", "@triton.jit\ndef masked_add(x, BLOCK):\n#include \"nope\"\n"}};
inline const EmbeddedFileSet kSourceSet{kSource};

class FakeTritonKernel final : public JitKernel<FakeTritonKernel, BlockKey, NoDescriptors> {
 public:
  FakeTritonKernel() : JitKernel("test.fake_triton") {}
  BlockKey dispatch(const NoDescriptors&) const override { return {}; }
  Program program(const BlockKey& key) const override {
    Program program;
    program.kernel_name = name();
    program.language = Language::triton;
    program.files = files_;
    program.source_path = "mylib.kernels:masked_add";
    program.name_expressions = {"masked_add"};
    // What python/zerojit's Triton owner asks for: the record above answers it.
    program.compile_request =
        R"({"signature":{"x":"*fp32","y":"*fp32","n":"i32","a":"fp32","BLOCK":"constexpr"},)"
        R"("constexprs":{"BLOCK":)" +
        std::to_string(key.block) +
        R"(},"divisible":[],"options":{"launch_pdl":true,"num_ctas":2}})";
    program.key_text = describe(key);
    return program;
  }
  const EmbeddedFileSet* files_ = &kSourceSet;
};

}  // namespace zerojit::testing

#include "examples/empty/empty.hpp"

#include "examples/empty/empty_params.h"

namespace zerojit::examples {

EmptyKey EmptyKernel::dispatch(const EmptyDescriptors& descriptors) const {
  if (descriptors.block_threads < 1 || descriptors.block_threads > 1024) {
    checks().fail("block_threads", "must be in [1, 1024]");
  }
  return EmptyKey{descriptors.block_threads};
}

Program EmptyKernel::program(const EmptyKey& key) const {
  // The block size does not change the code; it is in the key so that the benchmark can show
  // several executors. It reaches the compiler as a macro so that identities differ.
  return make_program(key, "examples/empty/empty.cu", "zj::examples::empty_kernel",
                      macro_definitions(key));
}

LaunchSpec<EmptyKey> EmptyKernel::plan(const EmptyKey& key, const EmptyArgs& args) const {
  LaunchSpec<EmptyKey> spec;
  spec.key = key;
  spec.geometry.block.x = static_cast<std::uint32_t>(args.block_threads);
  spec.args.push(zj::examples::EmptyParams{nullptr, nullptr, 0, 0.0});
  return spec;
}

WarmupSpace<EmptyDescriptors> EmptyKernel::warmup_space(const EmptyGate& gate) const {
  WarmupSpace<EmptyDescriptors> space;
  space.choices("block_threads", std::vector<int>{gate.block_threads},
                [](EmptyDescriptors& d, int v) { d.block_threads = v; });
  return space;
}

}  // namespace zerojit::examples

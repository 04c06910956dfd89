// A Backend that loads fake functions and counts launches without allocating: for measuring
// and checking the launch path's own cost on a machine without a GPU.
#pragma once

#include <atomic>

#include "zerojit/backend.hpp"

namespace zerojit::testing {

class NullBackend final : public Backend {
 public:
  std::string_view name() const override { return "null"; }
  int device_count() override { return 1; }
  std::string target_arch(int) override { return "sm_90a"; }
  LoadedFunction load(const CompiledArtifact&, std::string_view, int device) override {
    LoadedFunction function;
    function.function = reinterpret_cast<cuda::Function>(0x1000 + loads.fetch_add(1));
    function.device = device;
    return function;
  }
  bool is_capturing(cuda::Stream) override { return false; }
  void launch(const LoadedFunction&, const LaunchGeometry&, const KernelArgs&,
              cuda::Stream) override {
    launches.fetch_add(1, std::memory_order_relaxed);
  }

  std::atomic<std::uint64_t> loads{0};
  std::atomic<std::uint64_t> launches{0};
};

}  // namespace zerojit::testing

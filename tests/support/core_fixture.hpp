// Shared set-up of the core's CPU tests: a recording backend in place of the GPU, fresh
// example kernels and a quiet, disarmed monitor for every test.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "examples/examples.hpp"
#include "support/recording_backend.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::testing {

class CoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend = std::make_shared<RecordingBackend>();
    Runtime::instance().set_backend(backend);
    Runtime::instance().set_artifact_store(nullptr);
    for (KernelBase* kernel : Runtime::instance().kernels()) kernel->reset_for_testing();
    Monitor& monitor = Monitor::instance();
    monitor.disarm();
    monitor.set_mode(MonitorMode::off);
    monitor.set_verbose(false);
    monitor.reset_events();
    warnings.clear();
    monitor.set_sink([this](std::string_view text) { warnings.emplace_back(text); });
  }

  void TearDown() override {
    Monitor::instance().disarm();
    Monitor::instance().set_mode(MonitorMode::off);
    Monitor::instance().set_sink(nullptr);
    for (KernelBase* kernel : Runtime::instance().kernels()) kernel->reset_for_testing();
    Runtime::instance().set_backend(make_cuda_backend());
  }

  // A scale_add call on fake device pointers (the recording backend never dereferences them).
  static examples::ScaleAddArgs scale_add_args(DType dtype, std::int64_t length,
                                               std::uintptr_t base = 0x10000) {
    examples::ScaleAddArgs args;
    const auto desc = TensorDesc::contiguous(dtype, {length});
    args.x = make_tensor_ref(reinterpret_cast<void*>(base), desc);
    args.y = make_tensor_ref(reinterpret_cast<void*>(base + 0x100000), desc);
    args.alpha = 2.0;
    return args;
  }

  std::shared_ptr<RecordingBackend> backend;
  std::vector<std::string> warnings;
};

}  // namespace zerojit::testing

// Helpers of the GPU tests: the public check helpers (zerojit/testing.hpp: device buffers,
// streams, comparisons) and the skip that GPU tests take on a machine without a device.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "zerojit/testing.hpp"

// Skips the current test, saying why, when no CUDA device can be used; otherwise makes device
// 0's primary context current.
#define ZEROJIT_REQUIRE_GPU()                                                                   \
  do {                                                                                          \
    if (const std::string why_ = ::zerojit::testing::gpu_unavailable_reason(); !why_.empty()) { \
      GTEST_SKIP() << why_;                                                                     \
    }                                                                                           \
    ::zerojit::cuda::make_device_current(0);                                                    \
  } while (0)

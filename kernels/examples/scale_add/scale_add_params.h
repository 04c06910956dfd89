// Argument block of the example scale_add kernel, shared by the host and NVRTC.
#pragma once

namespace zj::examples {

constexpr int kScaleAddThreads = 256;

struct ScaleAddParams {
  const void* x;
  void* y;
  long long count;
  double alpha;
};

}  // namespace zj::examples

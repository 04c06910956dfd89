// Argument block of the consumer's axpy kernel, shared by the host and NVRTC.
#pragma once

namespace consumer {

inline constexpr int kAxpyThreads = 256;

struct AxpyParams {
  const void* x;
  void* y;
  long long count;
  double alpha;
};

}  // namespace consumer

// Argument block of the example empty kernel, shared by the host and NVRTC. Laid out like
// scale_add's, so that the launch benchmark compares launches of equal argument size.
#pragma once

namespace zj::examples {

struct EmptyParams {
  const void* x;
  void* y;
  long long count;
  double alpha;
};

}  // namespace zj::examples

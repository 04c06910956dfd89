// y[i] = alpha * x[i] + y[i]: the consumer project's own kernel, compiled by NVRTC from the
// copy embedded in the binary. <typename T, int Unroll>: each thread handles Unroll elements.
#include "axpy_params.h"

namespace consumer {

template <typename T, int Unroll>
__global__ void __launch_bounds__(kAxpyThreads) axpy_kernel(const __grid_constant__ AxpyParams p) {
  const long long first = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * Unroll;
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
#pragma unroll
  for (int u = 0; u < Unroll; ++u) {
    const long long i = first + u;
    if (i < p.count) y[i] = static_cast<T>(p.alpha) * x[i] + y[i];
  }
}

}  // namespace consumer

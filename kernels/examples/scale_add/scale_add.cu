// y[i] = alpha * x[i] + y[i], the example family's kernel the core's tests and benchmarks use.
//
// Template parameters: <typename T, int VectorWidth>; T is float or double. One thread handles
// VectorWidth consecutive elements. Geometry: block 256, grid ceil(n / (256 * VectorWidth)).
#include "examples/scale_add/scale_add_params.h"

namespace zj::examples {

template <typename T, int VectorWidth>
__global__ void __launch_bounds__(kScaleAddThreads)
    scale_add_kernel(const __grid_constant__ ScaleAddParams params) {
  const long long first =
      (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * VectorWidth;
  const T* x = static_cast<const T*>(params.x);
  T* y = static_cast<T*>(params.y);
  const T alpha = static_cast<T>(params.alpha);
#pragma unroll
  for (int v = 0; v < VectorWidth; ++v) {
    const long long i = first + v;
    if (i < params.count) y[i] = alpha * x[i] + y[i];
  }
}

}  // namespace zj::examples

// y[i] = alpha * x[i] + y[i]: the consumer project's own kernel, compiled by NVRTC from the
// copy embedded in the binary. <typename T, int Unroll>: the element type the key's dtype
// renders as (float, double, or zj::bf16_t from zerojit's device headers, embedded with
// zerojit_embed(... DEVICE_HEADERS)); each thread handles Unroll elements.
#include "axpy_params.h"
#include "zerojit/device/numerics.cuh"

namespace consumer {

// The arithmetic type of each element type: bf16 is loaded into float and rounded back to
// nearest even when stored.
__device__ __forceinline__ float load(float v) { return v; }
__device__ __forceinline__ double load(double v) { return v; }
__device__ __forceinline__ float load(zj::bf16_t v) { return zj::to_float(v); }
__device__ __forceinline__ void store(float& out, float v) { out = v; }
__device__ __forceinline__ void store(double& out, double v) { out = v; }
__device__ __forceinline__ void store(zj::bf16_t& out, float v) {
  out.bits = static_cast<zj::u16>(zj::pack_bf16x2_rn(v, 0.0f));
}

template <typename T, int Unroll>
__global__ void __launch_bounds__(kAxpyThreads) axpy_kernel(const __grid_constant__ AxpyParams p) {
  const long long first = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * Unroll;
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  using Math = decltype(load(T{}));
#pragma unroll
  for (int u = 0; u < Unroll; ++u) {
    const long long i = first + u;
    if (i < p.count) store(y[i], static_cast<Math>(p.alpha) * load(x[i]) + load(y[i]));
  }
}

}  // namespace consumer

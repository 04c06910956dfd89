"""Your own kernel on zerojit: a vectorized out = alpha * x + beta * y.

The kernel is the C++ contract written in Python: its arguments are declared once (params);
the key holds what the code specializes on (the dtype and the vector width); dispatch picks it
from the tensors' descriptors; plan(key, ...) turns the key dispatch chose and the call into a
launch (the base dispatches first, so a call launches the key warmup computed for the same
descriptors); the warmup space lists what a configuration can produce; warmup compiles every
key in parallel and loads it on every GPU; afterwards the monitor, in error mode, refuses a key
the space did not cover.

    python examples/python/user_kernel.py                  # on a GPU, against torch
    python examples/python/user_kernel.py --compile-only   # no GPU, no torch: sm_90a manifest
"""

import argparse
import dataclasses
import json
import sys

import zerojit
from zerojit import DType, Launch, Program, Space, TensorDesc

SOURCE = r"""
// Storage types of 16-bit floats: zerojit renders a bf16 / f16 key field as these names.
namespace zj {
struct bf16_t { unsigned short bits; };
struct f16_t { unsigned short bits; };
}  // namespace zj

namespace user {

__device__ __forceinline__ float load(float v) { return v; }
__device__ __forceinline__ float load(zj::bf16_t v) {
  return __uint_as_float(static_cast<unsigned>(v.bits) << 16);
}
__device__ __forceinline__ float load(zj::f16_t v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  return f;
}
__device__ __forceinline__ void store(float& out, float v) { out = v; }
__device__ __forceinline__ void store(zj::bf16_t& out, float v) {
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(out.bits) : "f"(v));
}
__device__ __forceinline__ void store(zj::f16_t& out, float v) {
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(out.bits) : "f"(v));
}

template <class T, int Width>
struct alignas(sizeof(T) * Width) Vector {
  T lane[Width];
};

// Rounded products and sum (no contraction into an FMA), as PyTorch computes
// alpha * x + beta * y in float: the result is bit-exact against it.
__device__ __forceinline__ float axpby(float alpha, float x, float beta, float y) {
  return __fadd_rn(__fmul_rn(alpha, x), __fmul_rn(beta, y));
}

template <class T, int Width>
__global__ void __launch_bounds__(256) axpby_kernel(const T* __restrict__ x,
                                                   const T* __restrict__ y, T* __restrict__ out,
                                                   float alpha, float beta, long long n) {
  const long long first = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * Width;
  if (first >= n) return;
  if (Width > 1) {  // dispatch chose Width only where n % Width == 0 and all are 16-byte aligned
    const Vector<T, Width> a = *reinterpret_cast<const Vector<T, Width>*>(x + first);
    const Vector<T, Width> b = *reinterpret_cast<const Vector<T, Width>*>(y + first);
    Vector<T, Width> c;
#pragma unroll
    for (int i = 0; i < Width; ++i) {
      store(c.lane[i], axpby(alpha, load(a.lane[i]), beta, load(b.lane[i])));
    }
    *reinterpret_cast<Vector<T, Width>*>(out + first) = c;
  } else {
    store(out[first], axpby(alpha, load(x[first]), beta, load(y[first])));
  }
}

}  // namespace user
"""

THREADS = 256
ELEMENT_BYTES = {DType.f16: 2, DType.bf16: 2, DType.f32: 4}


@dataclasses.dataclass(frozen=True)
class AxpbyKey:
    dtype: DType
    vector_width: int


class Axpby(zerojit.Kernel):
    name = "user.axpby"
    Key = AxpbyKey
    params = (
        ("x", "tensor"),
        ("y", "tensor"),
        ("out", "tensor"),
        ("alpha", "f32"),
        ("beta", "f32"),
        ("n", "i64"),
    )

    def dispatch(self, x: TensorDesc, y: TensorDesc, out: TensorDesc) -> AxpbyKey:
        if x.dtype not in ELEMENT_BYTES:
            raise zerojit.InvalidArgument(
                f"kernel {self.name}: x has dtype {x.dtype}; f16, bf16 or f32", self.name, "x"
            )
        for name, desc in (("y", y), ("out", out)):
            if desc.dtype != x.dtype or desc.shape != x.shape:
                raise zerojit.InvalidArgument(
                    f"kernel {self.name}: {name} must match x's dtype and shape", self.name, name
                )
        for name, desc in (("x", x), ("y", y), ("out", out)):
            if desc.ndim != 1 or not desc.is_contiguous():
                raise zerojit.InvalidArgument(
                    f"kernel {self.name}: {name} must be 1-D and contiguous", self.name, name
                )
        width = 16 // ELEMENT_BYTES[x.dtype]
        wide = x.shape[0] % width == 0 and min(x.alignment, y.alignment, out.alignment) >= 16
        return AxpbyKey(x.dtype, width if wide else 1)

    def program(self, key: AxpbyKey) -> Program:
        return Program(source=SOURCE, path="user/axpby.cu", function="user::axpby_kernel")

    def plan(self, key, x, y, out, alpha=1.0, beta=1.0):
        n = x.shape[0]
        per_block = THREADS * key.vector_width
        return Launch(
            grid=(n + per_block - 1) // per_block,
            block=THREADS,
            args=(x, y, out, alpha, beta, n),
            result=out,
        )

    def warmup_space(self):
        # What this "configuration" serves: bf16 and f32 (f16 is left out, so the monitor
        # demonstration below has an unwarmed key), any length up to 2^20, aligned or not.
        return (
            Space(
                lambda p: {
                    name: TensorDesc.contiguous(p["dtype"], (p["n"],), p["alignment"])
                    for name in ("x", "y", "out")
                }
            )
            .choices("dtype", [DType.bf16, DType.f32])
            .advance("n", 1, 1 << 20, zerojit.next_power_of_two)
            .choices("alignment", [4, 256])
        )


def compile_only():
    if not zerojit.nvrtc_available():
        print("NVRTC is not available: nothing to compile", file=sys.stderr)
        return 77
    zerojit.register(Axpby)
    manifest = zerojit.kernel_manifest([Axpby])
    print(json.dumps(manifest, indent=2))
    report = zerojit.warmup_kernels(
        [Axpby], compile_only=True, arch="sm_90a", jobs=2, arm_monitor=False
    )
    print(report["summary"])
    return 0 if report["ok"] and report["totals"]["keys"] == len(manifest["entries"]) else 1


def on_gpu():
    try:
        import torch
    except ImportError:
        print("the GPU run needs PyTorch; without it, use --compile-only", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("no CUDA device: use --compile-only", file=sys.stderr)
        return 77

    zerojit.register(Axpby)
    report = zerojit.warmup_kernels([Axpby], monitor="error")
    print(report["summary"])
    kernel = Axpby()
    for dtype in (torch.bfloat16, torch.float32):
        for n in (1, 1000, 4096, 1 << 20):
            x = torch.randn(n, device="cuda", dtype=dtype)
            y = torch.randn(n, device="cuda", dtype=dtype)
            out = kernel(x, y, torch.empty_like(x), 2.0, -0.5)
            expected = (2.0 * x.float() + -0.5 * y.float()).to(dtype)
            assert torch.equal(out, expected), (dtype, n)
    print("bit-exact against torch: bf16 and f32, lengths 1 .. 2^20")
    x = torch.randn(4096, device="cuda", dtype=torch.float16)
    try:
        kernel(x, x, torch.empty_like(x), 1.0, 1.0)
    except zerojit.RuntimeJitError as error:
        print(f"the monitor refused an unwarmed key: {error.kernel} [{error.key}]")
    else:
        raise AssertionError("the monitor did not refuse f16, which the space leaves out")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--compile-only",
        action="store_true",
        help="warm for sm_90a without a GPU and print the manifest",
    )
    args = parser.parse_args()
    return compile_only() if args.compile_only else on_gpu()


if __name__ == "__main__":
    sys.exit(main())

// Running a kernel on a GPU and checking it against a CPU reference, from a test or a check
// program of any project: device buffers, copies, streams, and a comparison within tolerances.
//
// Everything goes through zerojit's own driver wrapper (zerojit/cuda.hpp: the driver is loaded
// at run time), so a check built on this header needs no CUDA toolkit to build, and on a machine
// without a GPU it starts, says why it cannot run, and exits kSkipped:
//
//   if (const std::string why = zerojit::testing::gpu_unavailable_reason(); !why.empty()) {
//     std::printf("skipped: %s\n", why.c_str());
//     return zerojit::testing::kSkipped;   // ctest: SKIP_RETURN_CODE 77
//   }
//   zerojit::testing::DeviceBuffer x(host_x), y(host_y);
//   kernel({x.tensor(DType::f32, {n}), y.tensor(DType::f32, {n}), 2.0}, stream.get());
//   stream.synchronize();
//   const std::string failure = zerojit::testing::compare("y", y.download<float>(), expected,
//                                                          {.absolute = 1e-6, .relative = 1e-6});
//
// examples/consumer/src/gpu_check.cpp is a whole one; docs/CONSUMING.md walks through it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "zerojit/cuda.hpp"
#include "zerojit/dtype.hpp"
#include "zerojit/tensor.hpp"

namespace zerojit::testing {

// What a check program exits with when it could not run (no GPU): ctest's SKIP_RETURN_CODE
// by convention, as automake's test harness reads it.
inline constexpr int kSkipped = 77;

// Why no GPU can run a check: the driver cannot be loaded or initialized (its reason, e.g. "no
// CUDA driver: cannot load libcuda.so.1 ..."), or it reports no device. Empty when device 0 can
// be used. Never throws.
inline std::string gpu_unavailable_reason() {
  if (!cuda::driver_available()) return cuda::driver_unavailable_reason();
  if (cuda::device_count() == 0) return "no CUDA device: the driver reports none";
  return {};
}

// The device whose primary context is current on the calling thread (what a launch without an
// explicit device uses); when no context is current, device 0's is made current. Throws
// std::runtime_error for a context that is no device's primary context (pass the device then).
inline int current_device() {
  cuda::Context current = nullptr;
  cuda::check(cuda::driver().cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current == nullptr) {
    cuda::make_device_current(0);
    return 0;
  }
  for (int ordinal = 0; ordinal < cuda::device_count(); ++ordinal) {
    cuda::DeviceHandle device = 0;
    cuda::check(cuda::driver().cuDeviceGet(&device, ordinal), "cuDeviceGet");
    cuda::Context primary = nullptr;
    cuda::check(cuda::driver().cuDevicePrimaryCtxRetain(&primary, device),
                "cuDevicePrimaryCtxRetain");
    cuda::driver().cuDevicePrimaryCtxRelease(device);  // only looked at
    if (primary == current) return ordinal;
  }
  throw std::runtime_error(
      "the current CUDA context is no device's primary context: name the device");
}

// What the device argument of DeviceBuffer and Stream means by default.
inline constexpr int kCurrentDevice = -1;

// Device memory on one GPU (by default the current one: current_device()), freed when the
// buffer goes. Every driver call is checked: a failure throws CudaError naming the call. Each
// operation makes the buffer's device current for its duration only (cuda::ScopedDevice), so
// buffers on several devices can be used from one thread.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes, int device = kCurrentDevice)
      : bytes_(bytes), device_(device < 0 ? current_device() : device) {
    const cuda::ScopedDevice scope(device_);
    cuda::check(cuda::driver().cuMemAlloc(&pointer_, bytes == 0 ? 1 : bytes), "cuMemAlloc");
  }
  // A buffer holding a copy of `host`.
  template <class T>
  explicit DeviceBuffer(std::span<const T> host, int device = kCurrentDevice)
      : DeviceBuffer(host.size_bytes(), device) {
    upload(host);
  }
  template <class T>
  explicit DeviceBuffer(const std::vector<T>& host, int device = kCurrentDevice)
      : DeviceBuffer(std::span<const T>(host), device) {}

  ~DeviceBuffer() {
    if (pointer_ == 0) return;
    const cuda::ScopedDevice scope(device_);
    cuda::driver().cuMemFree(pointer_);  // nothing to do about a failure in a destructor
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : pointer_(std::exchange(other.pointer_, 0)), bytes_(other.bytes_), device_(other.device_) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(pointer_, other.pointer_);
    std::swap(bytes_, other.bytes_);
    std::swap(device_, other.device_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return reinterpret_cast<void*>(pointer_); }
  std::size_t bytes() const { return bytes_; }
  int device() const { return device_; }

  // Copies `host` to the start of the buffer (synchronously). Throws std::invalid_argument
  // when it does not fit.
  template <class T>
  void upload(std::span<const T> host) {
    static_assert(std::is_trivially_copyable_v<T>, "upload copies bytes");
    if (host.size_bytes() > bytes_) {
      throw std::invalid_argument("DeviceBuffer::upload: " + std::to_string(host.size_bytes()) +
                                  " bytes do not fit in a buffer of " + std::to_string(bytes_));
    }
    const cuda::ScopedDevice scope(device_);
    cuda::check(cuda::driver().cuMemcpyHtoD(pointer_, host.data(), host.size_bytes()),
                "cuMemcpyHtoD");
  }
  template <class T>
  void upload(const std::vector<T>& host) {
    upload(std::span<const T>(host));
  }

  // The whole buffer as elements of T, after everything launched on the device has finished
  // (an asynchronous kernel fault surfaces here, as a CudaError).
  template <class T>
  std::vector<T> download() const {
    static_assert(std::is_trivially_copyable_v<T>, "download copies bytes");
    std::vector<T> host(bytes_ / sizeof(T));
    const cuda::ScopedDevice scope(device_);
    cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    cuda::check(cuda::driver().cuMemcpyDtoH(host.data(), pointer_, host.size() * sizeof(T)),
                "cuMemcpyDtoH");
    return host;
  }

  // Sets every byte, e.g. to poison an output before a launch so that an element the kernel
  // should have written and did not is seen.
  void fill(unsigned char byte) {
    const cuda::ScopedDevice scope(device_);
    cuda::check(cuda::driver().cuMemsetD8(pointer_, byte, bytes_), "cuMemsetD8");
  }

  // The buffer as a contiguous tensor of `dtype` and `shape` on its device, for a kernel's
  // arguments. Throws std::invalid_argument when the tensor is larger than the buffer.
  TensorRef tensor(DType dtype, std::initializer_list<std::int64_t> shape) const {
    return tensor(dtype, std::span<const std::int64_t>(shape.begin(), shape.size()));
  }
  TensorRef tensor(DType dtype, std::span<const std::int64_t> shape) const {
    const TensorDesc desc = TensorDesc::contiguous(dtype, shape, Device::cuda(device_));
    std::int64_t elements = 1;
    for (std::int64_t extent : shape) elements *= extent;
    const auto bytes =
        static_cast<std::size_t>(elements) * static_cast<std::size_t>(dtype_size_bytes(dtype));
    if (bytes > bytes_) {
      throw std::invalid_argument("DeviceBuffer::tensor: a " + std::string(dtype_name(dtype)) +
                                  " tensor of " + std::to_string(bytes) +
                                  " bytes does not fit in a buffer of " + std::to_string(bytes_));
    }
    return make_tensor_ref(get(), desc);
  }

 private:
  cuda::DevicePtr pointer_ = 0;
  std::size_t bytes_;
  int device_;
};

// A stream on one device's primary context (by default the current device's; non-blocking: it
// does not wait for the legacy default stream), destroyed when it goes.
class Stream {
 public:
  explicit Stream(int device = kCurrentDevice) : device_(device < 0 ? current_device() : device) {
    const cuda::ScopedDevice scope(device_);
    cuda::check(cuda::driver().cuStreamCreate(&stream_, cuda::kStreamNonBlocking),
                "cuStreamCreate");
  }
  ~Stream() {
    if (stream_ == nullptr) return;
    const cuda::ScopedDevice scope(device_);
    cuda::driver().cuStreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cuda::Stream get() const { return stream_; }
  int device() const { return device_; }
  // Waits for the work launched on the stream; a kernel fault surfaces here as a CudaError.
  void synchronize() const {
    cuda::check(cuda::driver().cuStreamSynchronize(stream_), "cuStreamSynchronize");
  }

 private:
  cuda::Stream stream_ = nullptr;
  int device_;
};

// Waits for everything launched in the calling thread's current context.
inline void synchronize() { cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize"); }

// --- Comparing with a reference ------------------------------------------------------------

// An element passes when |actual - expected| <= absolute + relative * |expected|. The default,
// zero, asks for exact equality (integers, or a kernel meant to match its reference bit for
// bit). A NaN passes only against a NaN, an infinity only against the same infinity.
struct Tolerance {
  double absolute = 0.0;
  double relative = 0.0;
};

// Compares `actual` with `expected` element by element. Returns an empty string when every
// element passes; otherwise a report naming `what`, how many elements failed, the largest
// error, and the first `show` failures with their index, expected and actual values. Sizes
// that differ are a failure too.
template <class A, class E>
std::string compare(std::string_view what, std::span<const A> actual, std::span<const E> expected,
                    Tolerance tolerance = {}, std::size_t show = 8) {
  static_assert(std::is_arithmetic_v<A> && std::is_arithmetic_v<E>,
                "compare numbers; convert bf16/f16 bits first (bf16_to_float, f16_to_float)");
  const std::string name(what);
  if (actual.size() != expected.size()) {
    return name + ": " + std::to_string(actual.size()) + " elements, expected " +
           std::to_string(expected.size());
  }
  std::size_t failed = 0;
  double largest = 0.0;
  std::string lines;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const auto a = static_cast<double>(actual[i]);
    const auto e = static_cast<double>(expected[i]);
    bool ok = false;
    if (std::isnan(e) || std::isnan(a)) {
      ok = std::isnan(e) && std::isnan(a);
    } else if (std::isinf(e) || std::isinf(a)) {
      ok = a == e;
    } else {
      const double error = std::fabs(a - e);
      largest = std::max(largest, error);
      ok = error <= tolerance.absolute + tolerance.relative * std::fabs(e);
    }
    if (ok) continue;
    if (failed++ < show) {
      char line[160];
      std::snprintf(line, sizeof line, "\n  [%zu] expected %.9g, got %.9g", i, e, a);
      lines += line;
    }
  }
  if (failed == 0) return {};
  char head[192];
  std::snprintf(head, sizeof head,
                ": %zu of %zu elements outside |error| <= %g + %g * |expected| (largest finite "
                "error %.9g)",
                failed, actual.size(), tolerance.absolute, tolerance.relative, largest);
  return name + head + lines + (failed > show ? "\n  ..." : "");
}
template <class A, class E>
std::string compare(std::string_view what, const std::vector<A>& actual,
                    const std::vector<E>& expected, Tolerance tolerance = {},
                    std::size_t show = 8) {
  return compare(what, std::span<const A>(actual), std::span<const E>(expected), tolerance, show);
}

// --- 16-bit floats on the host ---------------------------------------------------------------
// zerojit renders bf16 and f16 keys as zj::bf16_t / zj::f16_t (zerojit/device/types.cuh):
// 16-bit storage, so a check fills and reads them as std::uint16_t bits and converts here.
// Float to 16 bits rounds to nearest even, as the device's cvt.rn does; NaN stays NaN.

inline float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof value);
  return value;
}

inline std::uint16_t float_to_bf16(float value) {
  std::uint32_t word;
  std::memcpy(&word, &value, sizeof word);
  if ((word & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((word >> 16) | 0x40u);
  word += 0x7FFFu + ((word >> 16) & 1u);
  return static_cast<std::uint16_t>(word >> 16);
}

inline float f16_to_float(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return (bits & 0x8000) != 0 ? -magnitude : magnitude;
}

inline std::uint16_t float_to_f16(float value) {
  std::uint32_t word;
  std::memcpy(&word, &value, sizeof word);
  const auto sign = static_cast<std::uint16_t>((word >> 16) & 0x8000u);
  const std::uint32_t magnitude = word & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);   // NaN
  if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // to inf
  if (magnitude < 0x38800000u) {  // below the smallest normal f16: a subnormal or zero
    // Scaled so that one f16 subnormal step is 1, then rounded to nearest even by the FPU.
    float scaled;
    const std::uint32_t positive = magnitude;
    std::memcpy(&scaled, &positive, sizeof scaled);
    scaled = std::nearbyint(std::ldexp(scaled, 24));
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(scaled));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  std::uint32_t rounded = magnitude - 0x38000000u;
  rounded += 0xFFFu + ((rounded >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(rounded >> 13));
}

}  // namespace zerojit::testing

// Helpers of the GPU tests: device buffers over the driver API, and the skip that GPU tests
// take on a machine without a device.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "zerojit/cuda.hpp"

namespace zerojit::testing {

// Skips the current test, saying why, when no CUDA device can be used.
#define ZEROJIT_REQUIRE_GPU()                                               \
  do {                                                                      \
    if (::zerojit::cuda::device_count() == 0) {                             \
      GTEST_SKIP() << "no CUDA device: "                                    \
                   << (::zerojit::cuda::driver_available()                  \
                           ? std::string("the driver reports none")         \
                           : ::zerojit::cuda::driver_unavailable_reason()); \
    }                                                                       \
    ::zerojit::cuda::make_device_current(0);                                \
  } while (0)

// Device memory owned by the test; every call is checked.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    cuda::check(cuda::driver().cuMemAlloc(&pointer_, bytes == 0 ? 1 : bytes), "cuMemAlloc");
  }
  template <class T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
    upload(host);
  }
  ~DeviceBuffer() {
    if (pointer_ != 0) cuda::driver().cuMemFree(pointer_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return reinterpret_cast<void*>(pointer_); }
  std::size_t bytes() const { return bytes_; }

  template <class T>
  void upload(const std::vector<T>& host) {
    ASSERT_LE(host.size() * sizeof(T), bytes_);
    cuda::check(cuda::driver().cuMemcpyHtoD(pointer_, host.data(), host.size() * sizeof(T)),
                "cuMemcpyHtoD");
  }
  template <class T>
  std::vector<T> download() const {
    std::vector<T> host(bytes_ / sizeof(T));
    cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    cuda::check(cuda::driver().cuMemcpyDtoH(host.data(), pointer_, host.size() * sizeof(T)),
                "cuMemcpyDtoH");
    return host;
  }
  void fill(unsigned char byte) {
    cuda::check(cuda::driver().cuMemsetD8(pointer_, byte, bytes_), "cuMemsetD8");
  }

 private:
  cuda::DevicePtr pointer_ = 0;
  std::size_t bytes_;
};

inline void synchronize() { cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize"); }

}  // namespace zerojit::testing

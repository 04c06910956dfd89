// What a launch needs besides the kernel: geometry and packed arguments, and the launch specs
// that a kernel's plan returns.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "zerojit/cuda.hpp"

namespace zerojit {

struct Dim3 {
  std::uint32_t x = 1;
  std::uint32_t y = 1;
  std::uint32_t z = 1;
  bool operator==(const Dim3&) const = default;
};

struct LaunchGeometry {
  Dim3 grid;
  Dim3 block;
  std::uint32_t shared_bytes = 0;  // dynamic shared memory

  // A grid with no blocks: the launch is skipped (and nothing is compiled for it).
  bool empty() const { return grid.x == 0 || grid.y == 0 || grid.z == 0; }
  bool operator==(const LaunchGeometry&) const = default;
};

inline constexpr int kMaxKernelParams = 32;
// Enough for any argument block of zerojit's kernels (the largest DSv4 block is ~200 bytes);
// small so that building and copying a launch spec stays cheap on the hot path.
inline constexpr std::size_t kKernelArgBytes = 512;

// Kernel arguments packed by value into a fixed buffer: building them never allocates, and a
// copy stays valid (offsets, not pointers, are stored).
class KernelArgs {
 public:
  // Appends one argument, aligned as the kernel's parameter would be. Throws zerojit::Error
  // past kMaxKernelParams arguments or kKernelArgBytes bytes.
  template <class T>
  KernelArgs& push(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are copied bytewise");
    const std::size_t offset = reserve(sizeof(T), alignof(T));
    std::memcpy(storage_.data() + offset, &value, sizeof(T));
    return *this;
  }

  int count() const { return count_; }
  std::size_t size(int index) const { return sizes_[static_cast<std::size_t>(index)]; }
  const std::byte* data(int index) const {
    return storage_.data() + offsets_[static_cast<std::size_t>(index)];
  }
  // The pointer array cuLaunchKernel takes, filled into `out` (kMaxKernelParams entries).
  void fill_pointers(std::array<void*, kMaxKernelParams>& out) const;

 private:
  std::size_t reserve(std::size_t bytes, std::size_t alignment);

  // Left uninitialized: only the bytes push() wrote are ever read.
  alignas(16) std::array<std::byte, kKernelArgBytes> storage_;
  std::array<std::uint16_t, kMaxKernelParams> offsets_{};
  std::array<std::uint16_t, kMaxKernelParams> sizes_{};
  std::uint16_t used_ = 0;
  int count_ = 0;
};

// Where a launch goes.
struct LaunchTarget {
  int device = 0;
  cuda::Stream stream = nullptr;
};

// The three shapes a kernel's plan can take (DESIGN.md, "Launch specs"):
//   LaunchSpec                       -> the launch returns nothing;
//   LaunchSpecWithOutputs            -> the launch returns the outputs the plan declared;
//   LaunchSpecWithFinalizer          -> the launch returns finalize(outputs), run after it.
// `device` is the CUDA device the arguments live on: the plan, which checks that they agree,
// says where the launch goes.
template <class Key>
struct LaunchSpec {
  Key key;
  LaunchGeometry geometry;
  KernelArgs args;
  int device = 0;
};

template <class Key, class Outputs>
struct LaunchSpecWithOutputs {
  Key key;
  LaunchGeometry geometry;
  KernelArgs args;
  Outputs outputs;
  int device = 0;
};

template <class Key, class Outputs, class Finalizer>
struct LaunchSpecWithFinalizer {
  Key key;
  LaunchGeometry geometry;
  KernelArgs args;
  Outputs outputs;
  Finalizer finalize;  // called as finalize(outputs) after the launch was enqueued
  int device = 0;
};

}  // namespace zerojit

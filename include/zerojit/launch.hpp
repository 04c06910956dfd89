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

// Launch attributes (cuLaunchKernelEx). A launch that carries none goes through cuLaunchKernel,
// so the hit path of every other kernel costs what it did.
struct LaunchAttributes {
  // Programmatic dependent launch: the kernel may start while the previous kernel in the stream
  // is still running; it must wait for that kernel's results (griddepcontrol.wait) before it
  // reads them.
  bool programmatic_serialization = false;
  bool cooperative = false;  // the grid may synchronize as a whole (all CTAs resident)
  Dim3 cluster{0, 0, 0};     // thread block cluster dimensions; x == 0: no cluster attribute
  // Spread a cluster's CTAs over the SMs (Triton asks for it with every cluster).
  bool cluster_spread = false;

  bool any() const { return programmatic_serialization || cooperative || cluster.x != 0; }
  bool operator==(const LaunchAttributes&) const = default;
};

struct LaunchGeometry {
  Dim3 grid;
  Dim3 block;
  std::uint32_t shared_bytes = 0;  // dynamic shared memory
  LaunchAttributes attributes;

  // A grid with no blocks: the launch is skipped (and nothing is compiled for it).
  bool empty() const { return grid.x == 0 || grid.y == 0 || grid.z == 0; }
  bool operator==(const LaunchGeometry&) const = default;
};

// Room for a Triton kernel's flattened parameter list (every pointer, size and stride of a
// fused kernel, plus Triton's two scratch pointers) and for any of zerojit's own argument
// blocks (the largest DSv4 block is ~200 bytes); small enough that building a launch spec on
// the hot path stays cheap (it is passed by reference, never copied: kernel.hpp).
inline constexpr int kMaxKernelParams = 64;
inline constexpr std::size_t kKernelArgBytes = 1024;

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

// A call whose arguments a language's argument packer made (the call path of kernels defined in
// Python), launched in its loaded function's form (language.hpp, LaunchForm):
//   plan        `geometry` whole, `args` the parameters;
//   recorded    `geometry.grid` the program grid (block, shared memory, cluster and attributes
//               come from the function's launch record), `args` the parameters, to which the
//               record's trailing null pointers are appended;
//   host_entry  `host_args`: the exported entry's argument pointers, its return code last.
struct PackedCall {
  LaunchGeometry geometry;
  KernelArgs args;
  void** host_args = nullptr;
  std::size_t host_count = 0;
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

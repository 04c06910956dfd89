// Asynchronous global -> shared copies (cp.async, sm_80 and later) and the shared-memory reads
// that consume them: the pieces of a per-warp streaming pipeline.
//
// A thread's copies complete in commit-group order; wait_copies<N>() returns once at most N of
// its groups are still in flight. A copy is visible to the thread that issued it after that
// wait; other threads need a barrier (__syncwarp / __syncthreads) as well. Kernels that let each
// lane read back only the bytes it copied itself need no barrier at all.
#pragma once

#include "zerojit/device/numerics.cuh"

namespace zj {

// The shared-window address of a __shared__ object, as the cp.async / ld.shared operand.
__device__ __forceinline__ u32 shared_address(const void* pointer) {
  u32 address;
  asm("{ .reg .u64 generic; cvta.to.shared.u64 generic, %1; cvt.u32.u64 %0, generic; }"
      : "=r"(address)
      : "l"(pointer));
  return address;
}

// The dynamic shared memory this launch was given, in bytes.
__device__ __forceinline__ u32 dynamic_shared_bytes() {
  u32 bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return bytes;
}

// 16 bytes, cached in L2 only (the source is read once per launch).
__device__ __forceinline__ void copy_async_16b(u32 shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared), "l"(global) : "memory");
}

// 16 bytes, cached in L2 only, asking L2 for the whole 256-byte sector group: for a warp that
// streams a contiguous 256 B or more.
__device__ __forceinline__ void copy_async_16b_stream(u32 shared, const void* global) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(shared), "l"(global)
               : "memory");
}

// The same, allocating in L1 as well (cp.async.ca): the dequant-gather's row copies, which
// measured 0.7-1.6 % faster this way on every gather case (H200, docs/BENCHMARKS.md section 8).
__device__ __forceinline__ void copy_async_16b_stream_l1(u32 shared, const void* global) {
  asm volatile("cp.async.ca.shared.global.L2::256B [%0], [%1], 16;" ::"r"(shared), "l"(global)
               : "memory");
}

// 8 bytes (cp.async.cg takes 16-byte copies only).
__device__ __forceinline__ void copy_async_8b(u32 shared, const void* global) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(shared), "l"(global) : "memory");
}

// Asks L2 to fetch [global, global + bytes) ahead of its use (global 16-byte aligned, bytes a
// multiple of 16). A hint with no result: unlike a load it holds no register while the bytes are
// on their way, so a CTA can stream its next piece of work into L2 while it computes this one.
// sm_90 and later: one bulk prefetch; earlier: one line prefetch per 128 bytes.
__device__ __forceinline__ void prefetch_l2(const void* global, u32 bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(global), "r"(bytes) : "memory");
#else
  const char* line = static_cast<const char*>(global);
  for (u32 offset = 0; offset < bytes; offset += 128) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(line + offset) : "memory");
  }
#endif
}

// Closes the thread's current group of copies (an empty group is allowed and completes at once).
__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Waits until at most `Pending` committed groups of this thread are still in flight.
template <int Pending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
}

__device__ __forceinline__ void load_shared_8b(u32 shared, u32 (&words)[2]) {
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];"
               : "=r"(words[0]), "=r"(words[1])
               : "r"(shared)
               : "memory");
}

__device__ __forceinline__ void load_shared_16b(u32 shared, u32 (&words)[4]) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(words[0]), "=r"(words[1]), "=r"(words[2]), "=r"(words[3])
               : "r"(shared)
               : "memory");
}

__device__ __forceinline__ u32 load_shared_byte(u32 shared) {
  u32 value;
  asm volatile("ld.shared.u8 %0, [%1];" : "=r"(value) : "r"(shared) : "memory");
  return value;
}

}  // namespace zj

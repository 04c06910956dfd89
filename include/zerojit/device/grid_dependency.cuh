// Programmatic dependent launch (PDL, sm_90 and later) from inside a kernel
// ("zerojit/device/grid_dependency.cuh", embedded with zerojit_embed(... DEVICE_HEADERS)).
//
// A kernel launched with LaunchAttributes::programmatic_serialization may start while the kernel
// before it in the stream is still running. It must not read what that kernel writes, nor write
// anything, until it has waited for it (griddepcontrol.wait: that grid has completed and its
// writes are visible). Without the attribute both instructions do nothing, so one compiled
// kernel serves launches with and without PDL (docs/DESIGN.md, "Programmatic dependent launch").
//
// The protocol zerojit's kernels keep, so that whoever launches them needs to know one rule:
//  * before the wait, a kernel reads only what no kernel still running writes (for the DSv4
//    kernels: step metadata such as positions, slots, block tables and lengths, and constants
//    such as cos/sin tables and norm weights), and writes nothing;
//  * it releases its own dependents first thing, before its prologue: a dependent's launch and
//    prologue then overlap this kernel's whole run, which at decode sizes (kernels with little
//    or nothing to do) is most of what PDL saves (docs/BENCHMARKS.md section 11). So while a
//    prologue runs, any of the kernels before it that released early may still be running: the
//    rule for whoever launches them is that the step metadata is complete before the step's
//    first launch with PDL (written by the host, or by kernels that do not release their
//    dependents before they complete);
//  * every thread waits before it exits, also a thread with nothing to do: a grid then completes
//    only after the grid before it, so "the kernel before me has completed" implies the same of
//    every kernel before that (GridDependency's destructor sees to it).
#pragma once

namespace zj {

// Waits until the grids this launch depends on have completed and their writes are visible.
// The "memory" clobber keeps the compiler from moving loads and stores across it; loads written
// as non-volatile asm (or __ldg) are not held by it and must not read dependent data, and
// neither may a non-coherent load (ld.global.nc): it declares its data read-only for the whole
// kernel, and ptxas has moved one above the wait.
__device__ __forceinline__ void wait_for_prerequisite_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the kernels launched after this one with PDL start (once every CTA of this grid has
// issued it or exited). It says nothing about this grid's writes: dependents still wait.
__device__ __forceinline__ void launch_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The protocol above for one thread: constructed first thing (it releases the dependents), then
// wait() before the first read of dependent data or the first write (later calls cost one
// predictable branch), and, at the latest, on the way out.
class GridDependency {
 public:
  __device__ __forceinline__ GridDependency() { launch_dependent_grids(); }
  GridDependency(const GridDependency&) = delete;
  GridDependency& operator=(const GridDependency&) = delete;
  __device__ __forceinline__ ~GridDependency() { wait(); }

  __device__ __forceinline__ void wait() {
    if (pending_) {
      wait_for_prerequisite_grids();
      pending_ = false;
    }
  }

 private:
  bool pending_ = true;
};

}  // namespace zj

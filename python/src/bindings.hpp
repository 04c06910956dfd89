// The parts of the zerojit._core extension module, each bound by its own translation unit.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "zerojit/registry.hpp"

namespace zerojit::python {

struct DynamicRegistration;

// Maps zerojit's C++ exceptions onto the Python classes of zerojit.runtime.errors (InvalidArgument
// is a ValueError, RuntimeJitError a zerojit.Error, ...), carrying their fields as attributes.
void register_errors(pybind11::module_& module);

// The DSv4 kernels' CPU references on host tensors (zerojit._core.reference).
void bind_kernels(pybind11::module_& module);

// The DSv4 ops' launch path (zerojit._core.fast): METH_FASTCALL functions, fast_ops.cpp.
void bind_fast_ops(pybind11::module_& module);

// Launch loops timed in C++ (zerojit._core.benchmark), for the Python host-cost benchmark.
void bind_benchmark(pybind11::module_& module);

// Configurations, manifests, warmup, the JIT monitor and the disk cache.
void bind_runtime(pybind11::module_& module);

// The C++ side of rank groups: zerojit.RedisStore and the records' comparison, ranks.cpp.
void bind_ranks(pybind11::module_& module);

// Python kernels (zerojit.Kernel): their core handle, spaces, launch path and the engine hooks
// (log and monitor bridges), py_bindings.cpp.
void bind_py_kernels(pybind11::module_& module);

// Whether the interpreter is shutting down (no Python may be called then).
bool finalizing();
// A Python callable held from C++ threads: called with the GIL acquired, released with it
// too, and leaked rather than released once the interpreter is finalizing.
std::shared_ptr<pybind11::object> hold(pybind11::object callable);

// The call path of every kernel defined in Python, whatever its language, kernel_call.cpp; the
// compilers of languages other than CUDA C++, installed from Python, language_bridge.cpp.
void bind_kernel_call(pybind11::module_& module);
void bind_language_compilers(pybind11::module_& module);

// `python -m zerojit ... --module M`: the tool library over Python modules' kernels, cli.cpp
// (only where the tool library is built).
void bind_cli(pybind11::module_& module);

// Registered Python kernels as warmup takes them: a list of (kernel, tag, slots, dead axes) or
// None.
std::vector<DynamicRegistration> dynamic_registrations(const pybind11::object& items);

// Ctrl-C (and a KeyboardInterrupt or SystemExit from the progress callback) during a warmup,
// which runs without the GIL: WarmupOptions::cancel_requested polls for it, and the caller
// raises it once the keys in flight are done. Construct it and call raise_if_interrupted()
// with the GIL held, on the thread that called warmup.
class WarmupInterrupt {
 public:
  WarmupInterrupt();
  ~WarmupInterrupt();
  WarmupInterrupt(const WarmupInterrupt&) = delete;
  WarmupInterrupt& operator=(const WarmupInterrupt&) = delete;

  // For cancel_requested (any thread, GIL not held): whether an interrupt is pending. On the
  // calling thread it also runs Python's signal handlers, so Ctrl-C's KeyboardInterrupt is
  // seen between keys rather than after the whole warmup.
  bool requested();
  // With the GIL held: keeps a KeyboardInterrupt, SystemExit or other non-Exception the
  // progress callback raised (returns true); an ordinary exception is left to the caller.
  bool capture(pybind11::error_already_set& error);
  // With the GIL held: raises what was kept, if anything.
  void raise_if_interrupted();

 private:
  std::thread::id caller_;
  std::mutex mutex_;
  PyObject* pending_ = nullptr;  // a strong reference, taken and released with the GIL held
  std::atomic<bool> interrupted_{false};
};

// A warmup progress callback for WarmupOptions::on_progress (nullptr for None): calls
// callable(kernel, key, origin, seconds, error, done, total) with the GIL taken, from the
// worker that finished the key. An interrupt it raises goes to `interrupt`; any other exception
// is reported as unraisable.
std::function<void(const WarmupProgress&)> progress_bridge(const pybind11::object& callable,
                                                           WarmupInterrupt& interrupt);

}  // namespace zerojit::python

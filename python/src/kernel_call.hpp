// The one call path of every kernel defined in Python, whatever its language (zerojit.Kernel,
// zerojit.TritonKernel, zerojit.CuteKernel): the arguments read in place (any DLPack producer's
// tensors as descriptors, scalars with their types), the key's slot and launch geometry found in
// a memo of what dispatch and the owner's geometry saw (Python runs only for inputs it has not
// seen), every tensor checked to be a CUDA tensor on the call's device, the arguments packed by
// the language's packer (src/languages/packer.hpp, the only language-specific step), and the
// launch through the kernel's executor cache in its entry kind's form: a warmed key with the GIL
// held, a miss (which may compile) with the GIL released. A call may also take the owner's call
// options by keyword (the meta-parameters an engine's launcher picks, `compress_ratio=4`): they
// are no kernel arguments, but reach dispatch and the geometry, so they are part of the memo.
// In the monitor's fallback mode a key that misses is served by its owner's fallback key (warmed,
// its specs covering the key's) while the key compiles in the background: here, once for every
// language, as JitKernel::operator() does for a C++ owner.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "call_values.hpp"
#include "py_kernel.hpp"

namespace zerojit::python {

class KernelCall {
 public:
  // `names`: the call's parameters in order; a call passes at least `required` of them.
  // `memoized[i]`: whether dispatch or the geometry sees parameter i (its descriptor or value is
  // part of the memo's key). `resolve(args)` returns (slot, geometry) for a call the memo has
  // not seen: geometry None (a host entry, or a kernel planned per call) or (grid, block,
  // shared bytes) with grid and block an int or a tuple of 1 to 3 ints, block None where the
  // launch record fixes it. `plan` (or None): called as plan(slot, args) on every call, for
  // owners whose launch needs arbitrary Python (zerojit.Kernel.plan): it returns (grid, block,
  // shared bytes, launch arguments, result), the launch arguments in the order of
  // `launch_names` (the kernel's parameters).
  // `defaults`: empty, or the values of the parameters after `required` that a call leaves out
  // (a Triton function's own defaults), one each. `options`: the call options, each (name,
  // default) with the default nullptr where the option must be given; a kernel with options
  // calls resolve(args, {option: value}).
  struct Option {
    std::string name;
    PyObject* fallback = nullptr;  // a strong reference, or nullptr: required
  };
  KernelCall(DynamicKernel& kernel, Language language, std::vector<std::string> names,
             std::size_t required, std::vector<bool> memoized, PyObject* resolve, PyObject* plan,
             std::vector<std::string> launch_names, std::vector<PyObject*> defaults = {},
             std::vector<Option> options = {});
  ~KernelCall();
  KernelCall(const KernelCall&) = delete;
  KernelCall& operator=(const KernelCall&) = delete;

  DynamicKernel& kernel() { return kernel_; }
  languages::ArgumentPacker& packer() { return *packer_; }
  // One call (with the GIL held); returns the result (None, or what a plan returned) or throws.
  // `keywords`/`keyword_values`: the call's keyword names (a tuple, or nullptr) and values:
  // stream= and the call options.
  PyObject* call(PyObject* const* args, Py_ssize_t count, PyObject* keywords,
                 PyObject* const* keyword_values);
  void forget_memo() { memo_.clear(); }
  // The owner's fallback (a kernel that declares `fallback(key)`): called as
  // fallback(slot, args, options or None) on a miss in the monitor's fallback mode, it returns
  // None or (the fallback's slot, its geometry for these arguments), as resolve does.
  void set_fallback(PyObject* fallback);
  // Whether every call `slot`'s spec accepts, `fallback`'s accepts too: "" or why not.
  std::string covers(std::int64_t slot, std::int64_t fallback) const {
    return packer_->covers(slot, fallback);
  }

 private:
  const CallMemo::Entry& resolve(PyObject* const* args, Py_ssize_t count,
                                 const std::vector<CallValue>& values,
                                 const std::vector<PyObject*>& options,
                                 const std::vector<std::uint64_t>& fingerprint, std::uint64_t hash);
  void hold_type(PyObject* object);
  // The call options' values (given, else their defaults) into `chosen`, and the stream.
  PyObject* read_keywords(PyObject* keywords, PyObject* const* keyword_values,
                          std::vector<PyObject*>& chosen) const;
  [[noreturn]] void unknown_keyword(PyObject* name) const;
  // The slot that serves a call whose key (`slot`) missed on the call's device, or -1 (the
  // usual miss): the owner's fallback, warmed there and covering the key, while the key compiles
  // in the background (KernelBase::serve_with_fallback). Sets the fallback's geometry.
  std::int64_t serving_fallback(std::int64_t slot, PyObject* const* args, Py_ssize_t count,
                                const std::vector<PyObject*>& options, FastCall& call,
                                const std::vector<CallValue>& values, LaunchGeometry& geometry);
  // Runs the per-call plan: the launch's values (in `values`), its geometry, and its result.
  PyObject* plan_call(std::int64_t slot, PyObject* const* args, Py_ssize_t count, FastCall& call,
                      std::vector<CallValue>& values, LaunchGeometry& geometry);

  DynamicKernel& kernel_;
  Language language_;
  std::unique_ptr<languages::ArgumentPacker> packer_;
  std::vector<std::string> names_;
  std::vector<std::string> launch_names_;  // of a planned call's launch arguments
  std::size_t required_;
  std::vector<bool> memoized_;
  PyObject* resolve_;                    // a strong reference
  PyObject* plan_;                       // a strong reference, or nullptr
  PyObject* fallback_ = nullptr;         // a strong reference, or nullptr: no fallbacks
  std::set<std::int64_t> uncovered_;     // keys whose fallback was found not to cover them
  std::vector<PyObject*> defaults_;      // strong references, for the parameters after required_
  std::vector<Option> options_;          // the call options, in declaration order
  std::vector<PyObject*> option_names_;  // interned str of each option, for keyword lookups
  CallMemo memo_;
  std::set<PyObject*> held_types_;  // scalar types the memo's words name, kept alive
};

}  // namespace zerojit::python

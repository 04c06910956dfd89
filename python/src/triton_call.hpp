// The call path of a Triton kernel (zerojit.TritonKernel): the arguments of one call read in
// place, the key and grid found in a memo of what dispatch and grid saw (Python runs only when
// the memo has not seen those inputs), every argument checked against the specialization the
// key's program compiled, packed as Triton's own launcher packs it, and launched through the
// kernel's executor cache with the block, shared memory, cluster and launch attributes of the
// compiled kernel's launch record.
#pragma once

#include <Python.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "call_values.hpp"
#include "py_kernel.hpp"

namespace zerojit::python {

// How one argument of a call is checked and packed, as the key's program compiled it.
struct TritonArgument {
  enum class Kind : std::uint8_t { pointer, integer, floating, boolean, constant };
  std::string name;
  Kind kind = Kind::pointer;
  std::string type;                 // Triton's: "*fp32", "i32", "fp16", "i1"; "constexpr"
  std::optional<DType> pointee;     // pointer: the element type it was compiled for
  bool divisible_by_16 = false;     // pointer: 16-byte aligned base; integer: a multiple of 16
  bool constant_none = false;       // constant: compiled as None
  std::int64_t constant_value = 0;  // constant: compiled as this integer (Triton's "== 1")
};

// Parses one argument's spec as zerojit.TritonKernel sends it: (name, kind, type, pointee dtype
// name or "", divisible, constant None?, constant value). Throws InvalidArgument naming it.
TritonArgument parse_triton_argument(const std::string& kernel, const std::string& name,
                                     const std::string& kind, const std::string& type,
                                     const std::string& pointee, bool divisible, bool constant_none,
                                     std::int64_t constant_value);

class TritonLauncher {
 public:
  // `memoized[i]`: whether dispatch or grid sees argument i (its descriptor or value is part of
  // the memo's key). `resolve(args)` returns (slot, grid) for a call the memo has not seen.
  TritonLauncher(DynamicKernel& kernel, std::vector<std::string> names, std::vector<bool> memoized,
                 PyObject* resolve);
  ~TritonLauncher();
  TritonLauncher(const TritonLauncher&) = delete;
  TritonLauncher& operator=(const TritonLauncher&) = delete;

  DynamicKernel& kernel() { return kernel_; }
  // The arguments of a key's specialization, set when the key is interned.
  void set_spec(std::int64_t slot, std::vector<TritonArgument> arguments);
  // One call of `count` arguments (with the GIL held); returns None or throws.
  PyObject* call(PyObject* const* args, Py_ssize_t count, PyObject* stream);
  void forget_memo() { memo_.clear(); }

 private:
  const CallMemo::Entry& resolve(PyObject* const* args, Py_ssize_t count,
                                 const std::vector<std::uint64_t>& fingerprint, std::uint64_t hash);

  DynamicKernel& kernel_;
  std::vector<std::string> names_;
  std::vector<bool> memoized_;
  PyObject* resolve_;                               // a strong reference
  std::vector<std::vector<TritonArgument>> specs_;  // by slot
  CallMemo memo_;
};

}  // namespace zerojit::python

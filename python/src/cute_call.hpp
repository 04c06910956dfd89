// The call path of a CuTeDSL kernel (zerojit.CuteKernel): the arguments read in place, the key
// found in a memo of what dispatch saw (Python runs only for inputs not seen before), every
// tensor checked against what the compiled code assumes and cannot check itself (dtype, static
// extents, divisibility and width of the dynamic ones, compact strides, alignment), the exported
// host entry's argument structs filled from the descriptors (its C ABI: a data pointer, the
// dynamic extents, the dynamic strides), and the entry run through the kernel's executor cache.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

#include "call_values.hpp"
#include "py_kernel.hpp"

namespace zerojit::python {

// One runtime argument of a CuTeDSL entry, as the key's program compiled it.
struct CuteArgument {
  enum class Kind : std::uint8_t { tensor, scalar, stream };
  std::string name;
  Kind kind = Kind::tensor;
  // tensor
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;         // -1: a dynamic extent
  std::vector<std::int64_t> stride_order;  // as CuTeDSL takes it: order 0 is the innermost mode
  std::int64_t divisibility = 1;           // of every dynamic extent
  int shape_bytes = 4;                     // of a dynamic extent in the struct (4 or 8)
  std::vector<int> dynamic_strides;        // the modes whose stride the struct carries
  int stride_bytes = 8;
  std::int64_t assumed_align = 16;  // bytes, of the data pointer
  // scalar: "i32", "i64", "f32", "f64", "bool"
  std::string type;

  // The struct the entry takes for a tensor: {void* data; dynamic extents; dynamic strides}.
  std::size_t struct_bytes() const;
  std::size_t strides_offset() const;
};

class CuteLauncher {
 public:
  // `names`: the call's arguments (the function's runtime parameters, the stream excluded,
  // which the spec places among the entry's arguments); `resolve(args)`: the slot of a call
  // the memo has not seen.
  CuteLauncher(DynamicKernel& kernel, std::vector<std::string> names, std::vector<bool> memoized,
               PyObject* resolve);
  ~CuteLauncher();
  CuteLauncher(const CuteLauncher&) = delete;
  CuteLauncher& operator=(const CuteLauncher&) = delete;

  DynamicKernel& kernel() { return kernel_; }
  void set_spec(std::int64_t slot, std::vector<CuteArgument> arguments);
  PyObject* call(PyObject* const* args, Py_ssize_t count, PyObject* stream);

 private:
  std::int64_t resolve(PyObject* const* args, Py_ssize_t count,
                       const std::vector<std::uint64_t>& fingerprint, std::uint64_t hash);

  DynamicKernel& kernel_;
  std::vector<std::string> names_;
  std::vector<bool> memoized_;
  PyObject* resolve_;                             // a strong reference
  std::vector<std::vector<CuteArgument>> specs_;  // by slot
  CallMemo memo_;
};

}  // namespace zerojit::python

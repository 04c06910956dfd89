// One call's arguments as the Python call paths of the kernel languages read them
// (zerojit.TritonKernel, zerojit.CuteKernel): each argument read once (a Python int, float,
// bool or None, numpy's scalars, or a tensor of any DLPack producer), the words of what dispatch
// may depend on, and the memo from those words to the key's slot (and grid) that lets a call run
// no Python when its inputs were seen before.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fast_call.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::python {

// One argument of a call, read once.
struct CallValue {
  enum class Kind : std::uint8_t { none, boolean, integer, floating, tensor };
  Kind kind = Kind::none;
  bool flag = false;
  bool above_int64 = false;  // an integer in [2^63, 2^64): `unsigned_integer` holds it
  std::int64_t integer = 0;
  std::uint64_t unsigned_integer = 0;
  double number = 0.0;
  TensorRef tensor;
};

// Reads one argument (tensors through the DLPack exchange API or the capsule protocol).
CallValue read_value(FastCall& call, PyObject* object, std::string_view name);

// Appends what dispatch (and grid) may depend on of `value`: a memo hit means they would see
// the same inputs.
void add_fingerprint(const CallValue& value, std::vector<std::uint64_t>& words);

// "17", "None", "a tensor": for messages.
std::string integer_text(const CallValue& value);
std::string kind_name(CallValue::Kind kind);
// Every argument described, for a miss's monitor event and errors.
std::string describe_values(const std::vector<std::string>& names,
                            const std::vector<CallValue>& values);

// Fingerprint -> (slot, grid), bounded: a workload of ever-new shapes (a sweep) starts over
// rather than growing for good. Used with the GIL held.
class CallMemo {
 public:
  struct Entry {
    std::vector<std::uint64_t> fingerprint;
    std::int64_t slot = -1;
    Dim3 grid;
  };
  const Entry* find(const std::vector<std::uint64_t>& fingerprint, std::uint64_t hash) const;
  const Entry& insert(Entry entry, std::uint64_t hash);
  void clear();
  static std::uint64_t hash(const std::vector<std::uint64_t>& fingerprint);

 private:
  static constexpr std::size_t kLimit = 4096;
  std::unordered_map<std::uint64_t, std::vector<Entry>> entries_;
  std::size_t size_ = 0;
};

}  // namespace zerojit::python

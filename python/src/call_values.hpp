// One call's arguments as the call path of every kernel defined in Python reads them
// (kernel_call.cpp): each argument read once (a Python int, float, bool or None, numpy's
// scalars, or a tensor of any DLPack producer), the words of what dispatch (and the launch
// geometry) may depend on, and the memo from those words to the key's slot and geometry that
// lets a call run no Python when its inputs were seen before.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fast_call.hpp"
#include "languages/packer.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::python {

using languages::CallValue;
using languages::integer_text;
using languages::kind_name;

// Reads one argument (tensors through the DLPack exchange API or the capsule protocol).
CallValue read_value(FastCall& call, PyObject* object, std::string_view name);

// Appends what dispatch (and the geometry) may depend on of `value`, the type of a scalar
// included (1, 1.0, True and numpy.int64(1) stay apart): a memo hit means they would see the
// same inputs.
void add_fingerprint(const CallValue& value, std::vector<std::uint64_t>& words);

// Every argument described, for a miss's monitor event and errors.
std::string describe_values(const std::vector<std::string>& names,
                            const std::vector<CallValue>& values);

// Fingerprint -> (slot, launch geometry), bounded: a workload of ever-new shapes (a sweep)
// starts over rather than growing for good. Used with the GIL held.
class CallMemo {
 public:
  struct Entry {
    std::vector<std::uint64_t> fingerprint;
    std::int64_t slot = -1;
    LaunchGeometry geometry;  // what the owner's grid (or geometry) gave; empty for a host entry
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

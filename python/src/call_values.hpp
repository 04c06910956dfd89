// One call's arguments as the Python call paths of the kernel languages read them
// (zerojit.TritonKernel, zerojit.CuteKernel): each argument read once (a Python int, float,
// bool or None, numpy's scalars, or a tensor of any DLPack producer), the words of what dispatch
// may depend on, and the memo from those words to the key's slot (and grid) that lets a call run
// no Python when its inputs were seen before.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <mutex>
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

// The front of a language kernel's C-level __call__(self, *args, stream=None): the arguments
// after self, the stream keyword (None when absent) and the launcher the instance's `_launcher`
// capsule (named `capsule_name`) holds. False, with a Python error set, on a bad call.
struct InstanceCall {
  PyObject* const* args = nullptr;
  Py_ssize_t count = 0;
  PyObject* stream = nullptr;
  void* launcher = nullptr;
};
bool read_instance_call(PyObject* const* argv, Py_ssize_t nargsf, PyObject* kwnames,
                        const char* capsule_name, const char* kernel_class, InstanceCall& call);

// The method object of a C-level __call__ (bound to the instance when looked up on it): a new
// reference, or nullptr with a Python error set.
PyObject* new_instance_method(PyMethodDef* definition);

// A launcher kept for the life of the process, never destroyed: a thread may be launching
// through it with the GIL released, and a kernel class defined again gets a new one beside it.
template <typename Launcher, typename... Arguments>
Launcher* keep_for_process(Arguments&&... arguments) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::unique_ptr<Launcher>>();
  std::lock_guard lock(mutex);
  kept->push_back(std::make_unique<Launcher>(std::forward<Arguments>(arguments)...));
  return kept->back().get();
}

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

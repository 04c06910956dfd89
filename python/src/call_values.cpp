#include "call_values.hpp"

#include <bit>

#include "exchange.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace zerojit::python {
namespace {

std::string type_name(PyObject* object) { return Py_TYPE(object)->tp_name; }

bool is_numpy_bool(PyObject* object) {
  const std::string_view type = Py_TYPE(object)->tp_name;
  return type == "numpy.bool" || type == "numpy.bool_";
}

void read_integer(const FastCall& call, PyObject* object, std::string_view name, CallValue& out) {
  out.kind = CallValue::Kind::integer;
  int overflow = 0;
  out.integer = PyLong_AsLongLongAndOverflow(object, &overflow);
  if (out.integer == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    call.fail(name, "must be an integer, got " + type_name(object));
  }
  if (overflow == 0) return;
  if (overflow > 0) {
    out.unsigned_integer = PyLong_AsUnsignedLongLong(object);
    if (!PyErr_Occurred()) {
      out.above_int64 = true;
      return;
    }
    PyErr_Clear();
  }
  call.fail(name, "is an integer outside [-2^63, 2^64), which no kernel parameter holds");
}

}  // namespace

// Python ints, floats, bools and None (and numpy's scalars), else a tensor of any DLPack
// producer.
CallValue read_value(FastCall& call, PyObject* object, std::string_view name) {
  CallValue value;
  if (object == Py_None) return value;
  value.type = Py_TYPE(object);  // types are never freed while an instance lives
  if (PyBool_Check(object) || is_numpy_bool(object)) {
    const int truth = PyObject_IsTrue(object);
    if (truth < 0) {
      PyErr_Clear();
      call.fail(name, "must be True or False");
    }
    value.kind = CallValue::Kind::boolean;
    value.flag = truth != 0;
    return value;
  }
  if (PyLong_Check(object)) {
    read_integer(call, object, name, value);
    return value;
  }
  if (PyFloat_Check(object)) {
    value.kind = CallValue::Kind::floating;
    value.number = PyFloat_AS_DOUBLE(object);
    return value;
  }
  if (exchange_api_of(object) != nullptr || PyObject_HasAttrString(object, "__dlpack__")) {
    value.kind = CallValue::Kind::tensor;
    value.tensor = call.tensor(object, name);
    return value;
  }
  if (PyIndex_Check(object)) {  // numpy integers
    PyObject* index = PyNumber_Index(object);
    if (index == nullptr) {
      PyErr_Clear();
      call.fail(name, "must be an integer, got " + type_name(object));
    }
    read_integer(call, index, name, value);
    Py_DECREF(index);
    return value;
  }
  const double number = PyFloat_AsDouble(object);  // numpy floats, through __float__
  if (number == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    call.fail(name, "must be a tensor (a DLPack producer), an int, a float, a bool or None, got " +
                        type_name(object));
  }
  value.kind = CallValue::Kind::floating;
  value.number = number;
  return value;
}

// What dispatch and grid may depend on, as words: a memo hit means they would see the same.
void add_fingerprint(const CallValue& value, std::vector<std::uint64_t>& words) {
  words.push_back(static_cast<std::uint64_t>(value.kind));
  if (value.kind != CallValue::Kind::tensor) {
    words.push_back(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(value.type)));
  }
  switch (value.kind) {
    case CallValue::Kind::none:
      return;
    case CallValue::Kind::boolean:
      words.push_back(value.flag ? 1 : 0);
      return;
    case CallValue::Kind::integer:
      words.push_back(value.above_int64 ? value.unsigned_integer
                                        : static_cast<std::uint64_t>(value.integer));
      words.push_back(value.above_int64 ? 1 : 0);
      return;
    case CallValue::Kind::floating:
      words.push_back(std::bit_cast<std::uint64_t>(value.number));
      return;
    case CallValue::Kind::tensor: {
      const TensorDesc& desc = value.tensor.desc;
      words.push_back(static_cast<std::uint64_t>(desc.dtype));
      words.push_back(static_cast<std::uint64_t>(desc.device.kind) << 32 |
                      static_cast<std::uint32_t>(desc.device.ordinal));
      words.push_back(static_cast<std::uint64_t>(desc.ndim));
      for (int d = 0; d < desc.ndim; ++d) {
        words.push_back(static_cast<std::uint64_t>(desc.size(d)));
        words.push_back(static_cast<std::uint64_t>(desc.stride(d)));
      }
      words.push_back(static_cast<std::uint64_t>(desc.alignment));
      return;
    }
  }
}

std::string describe_values(const std::vector<std::string>& names,
                            const std::vector<CallValue>& values) {
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += (text.empty() ? "" : ", ") + names[i] + ": " +
            (values[i].kind == CallValue::Kind::tensor    ? to_string(values[i].tensor.desc)
             : values[i].kind == CallValue::Kind::integer ? integer_text(values[i])
                                                          : kind_name(values[i].kind));
  }
  return text;
}

const CallMemo::Entry* CallMemo::find(const std::vector<std::uint64_t>& fingerprint,
                                      std::uint64_t hash) const {
  const auto bucket = entries_.find(hash);
  if (bucket == entries_.end()) return nullptr;
  for (const Entry& entry : bucket->second) {
    if (entry.fingerprint == fingerprint) return &entry;
  }
  return nullptr;
}

const CallMemo::Entry& CallMemo::insert(Entry entry, std::uint64_t hash) {
  if (size_ >= kLimit) clear();
  auto& bucket = entries_[hash];
  bucket.push_back(std::move(entry));
  ++size_;
  return bucket.back();
}

void CallMemo::clear() {
  entries_.clear();
  size_ = 0;
}

std::uint64_t CallMemo::hash(const std::vector<std::uint64_t>& fingerprint) {
  return XXH3_64bits(fingerprint.data(), fingerprint.size() * sizeof(std::uint64_t));
}

}  // namespace zerojit::python

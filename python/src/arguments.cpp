#include "arguments.hpp"

#include <string>

#include "zerojit/error.hpp"

namespace zerojit::python {
namespace {

[[noreturn]] void fail(std::string_view kernel, std::string_view argument,
                       const std::string& problem) {
  throw InvalidArgument(std::string(kernel), std::string(argument), problem);
}

// What the argument must be, in words.
std::string domain(std::int64_t low, std::int64_t high) {
  using Limits = std::numeric_limits<std::int64_t>;
  if (low == Limits::min() && high == Limits::max()) return "an integer that fits 64 bits";
  if (low == std::numeric_limits<int>::min() && high == std::numeric_limits<int>::max()) {
    return "an int32 (from " + std::to_string(low) + " to " + std::to_string(high) + ")";
  }
  return "an integer from " + std::to_string(low) + " to " + std::to_string(high);
}

// str(object), for a value that is an integer but out of range (its digits, however many).
std::string shown(PyObject* object) {
  PyObject* text = PyObject_Str(object);
  std::string out;
  if (text != nullptr) {
    Py_ssize_t size = 0;
    if (const char* bytes = PyUnicode_AsUTF8AndSize(text, &size)) out.assign(bytes, size);
    Py_DECREF(text);
  }
  if (out.empty()) PyErr_Clear();
  return out.size() > 64 ? out.substr(0, 60) + "..." : out;
}

}  // namespace

std::int64_t integer_argument(std::string_view kernel, PyObject* object, std::string_view argument,
                              std::int64_t low, std::int64_t high) {
  // __index__ only (PyLong_AsLongLong took __int__ before Python 3.10, truncating floats).
  PyObject* index = object == Py_None ? nullptr : PyNumber_Index(object);
  if (index == nullptr) {
    PyErr_Clear();
    fail(kernel, argument,
         "must be " + domain(low, high) + ", got " + std::string(Py_TYPE(object)->tp_name));
  }
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (value == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    overflow = 1;
  }
  if (overflow != 0 || value < low || value > high) {
    fail(kernel, argument, "must be " + domain(low, high) + ", got " + shown(object));
  }
  return value;
}

std::optional<std::int64_t> optional_integer_argument(std::string_view kernel, PyObject* object,
                                                      std::string_view argument) {
  if (object == Py_None) return std::nullopt;
  return integer_argument(kernel, object, argument);
}

int int32_argument(std::string_view kernel, PyObject* object, std::string_view argument) {
  return static_cast<int>(integer_argument(
      kernel, object, argument, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
}

double number_argument(std::string_view kernel, PyObject* object, std::string_view argument) {
  const double value = PyFloat_AsDouble(object);
  if (value == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    fail(kernel, argument, "must be a number, got " + std::string(Py_TYPE(object)->tp_name));
  }
  return value;
}

std::optional<bool> optional_flag_argument(std::string_view kernel, PyObject* object,
                                           std::string_view argument) {
  if (object == Py_None) return std::nullopt;
  if (PyBool_Check(object)) return object == Py_True;
  const std::string_view type = Py_TYPE(object)->tp_name;
  if (type != "numpy.bool" && type != "numpy.bool_") {
    fail(kernel, argument, "must be True, False or None, got " + std::string(type));
  }
  const int value = PyObject_IsTrue(object);
  if (value < 0) {
    PyErr_Clear();
    fail(kernel, argument, "must be True, False or None");
  }
  return value != 0;
}

}  // namespace zerojit::python

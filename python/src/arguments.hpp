// Scalar arguments from Python, one rule for the launch path (fast_call.cpp) and the CPU
// references (reference_ops.cpp). Integers: an int, or anything an int can be taken from exactly
// (__index__: numpy integers, bool), within the range the kernel takes. A float, a string,
// None or an int outside the range is refused with InvalidArgument naming the kernel and the
// argument: never truncated (1.9 as 1), parsed ("1" as 1) or wrapped (2**32 + 2 as 2).
#pragma once

#include <Python.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace zerojit::python {

std::int64_t integer_argument(std::string_view kernel, PyObject* object, std::string_view argument,
                              std::int64_t low = std::numeric_limits<std::int64_t>::min(),
                              std::int64_t high = std::numeric_limits<std::int64_t>::max());
// None gives nothing; anything else as integer_argument.
std::optional<std::int64_t> optional_integer_argument(std::string_view kernel, PyObject* object,
                                                      std::string_view argument);
// An argument the kernel takes as an int (32 bits).
int int32_argument(std::string_view kernel, PyObject* object, std::string_view argument);
// A float (anything with __float__): a string or None is refused naming the argument.
double number_argument(std::string_view kernel, PyObject* object, std::string_view argument);
// None gives nothing; else a bool (or numpy's): a truthy "False" must not read as True.
std::optional<bool> optional_flag_argument(std::string_view kernel, PyObject* object,
                                           std::string_view argument);

}  // namespace zerojit::python

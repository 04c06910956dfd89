// The one error type of the DSv4 configuration.
#pragma once

#include "zerojit/error.hpp"

namespace zerojit::dsv4 {

// Raised for any malformed or inconsistent configuration; the message names the field. A
// zerojit::Error, so a caller catching the library's errors catches this one too.
class ConfigError : public Error {
 public:
  using Error::Error;
};

}  // namespace zerojit::dsv4

// The one error type of the DSv4 configuration.
#pragma once

#include <stdexcept>

namespace zerojit::dsv4 {

// Raised for any malformed or inconsistent configuration; the message names the field.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace zerojit::dsv4

#include "zerojit/error.hpp"

#include <utility>

namespace zerojit {

CudaError::CudaError(std::string call, int code, std::string error_name, std::string description)
    : Error(call + " failed: " + error_name + " (" + std::to_string(code) + ")" +
            (description.empty() ? "" : ": " + description)),
      call_(std::move(call)),
      code_(code),
      error_name_(std::move(error_name)) {}

CompileError::CompileError(std::string kernel, std::string key, std::string log,
                           std::string message)
    : Error(std::move(message)),
      kernel_(std::move(kernel)),
      key_(std::move(key)),
      log_(std::move(log)) {}

InvalidArgument::InvalidArgument(std::string kernel, std::string argument,
                                 const std::string& problem)
    : Error(kernel + ": argument '" + argument + "': " + problem),
      kernel_(std::move(kernel)),
      argument_(std::move(argument)) {}

RuntimeJitError::RuntimeJitError(std::string kernel, std::string key, std::string descriptors,
                                 const std::string& reason)
    : Error("runtime JIT of kernel " + kernel + " [" + key + "]: " + reason +
            (descriptors.empty() ? "" : "\n  runtime descriptors: " + descriptors)),
      kernel_(std::move(kernel)),
      key_(std::move(key)),
      descriptors_(std::move(descriptors)) {}

}  // namespace zerojit

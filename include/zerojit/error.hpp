// The exceptions zerojit throws. Each names what is at fault (kernel, key, argument, driver
// call) so that a message read in a log is enough to act on.
#pragma once

#include <stdexcept>
#include <string>

namespace zerojit {

// Base of every zerojit exception.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Something this process lacks: the CUDA driver, NVRTC, the CUDA headers, a GPU. The library
// starts without any of them; only the feature that needs one throws this.
class UnavailableError : public Error {
 public:
  using Error::Error;
};

// A CUDA driver call failed. Carries the call and the driver's error name.
class CudaError : public Error {
 public:
  CudaError(std::string call, int code, std::string error_name, std::string description);
  const std::string& call() const { return call_; }
  int code() const { return code_; }
  const std::string& error_name() const { return error_name_; }

 private:
  std::string call_;
  int code_;
  std::string error_name_;
};

// NVRTC failed to compile a kernel specialization. Carries the kernel, the key and NVRTC's log.
class CompileError : public Error {
 public:
  CompileError(std::string kernel, std::string key, std::string log, std::string message);
  const std::string& kernel() const { return kernel_; }
  const std::string& key() const { return key_; }
  const std::string& log() const { return log_; }

 private:
  std::string kernel_;
  std::string key_;
  std::string log_;
};

// A caller passed a tensor or value a kernel cannot take. Nothing was launched.
class InvalidArgument : public Error {
 public:
  InvalidArgument(std::string kernel, std::string argument, const std::string& problem);
  const std::string& kernel() const { return kernel_; }
  const std::string& argument() const { return argument_; }

 private:
  std::string kernel_;
  std::string argument_;
};

// A compile or module load happened after warmup while the JIT monitor is in error mode, or
// was requested while a stream is capturing a CUDA graph (always an error).
class RuntimeJitError : public Error {
 public:
  RuntimeJitError(std::string kernel, std::string key, std::string descriptors,
                  const std::string& reason);
  const std::string& kernel() const { return kernel_; }
  const std::string& key() const { return key_; }
  const std::string& descriptors() const { return descriptors_; }

 private:
  std::string kernel_;
  std::string key_;
  std::string descriptors_;
};

// A launch was refused before reaching the driver: the packed arguments do not match the
// compiled kernel's parameter list. Nothing was launched.
class LaunchError : public Error {
 public:
  using Error::Error;
};

}  // namespace zerojit

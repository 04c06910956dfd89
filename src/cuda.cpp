#include "zerojit/cuda.hpp"

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "environment.hpp"
#include "zerojit/error.hpp"

namespace zerojit::cuda {
namespace {

struct DriverState {
  DriverApi api{};
  bool loaded = false;
  std::string reason;
};

// Resolves `name` into `slot`; returns false (with the reason) when a required symbol is absent.
template <class Fn>
bool resolve(void* library, Fn& slot, const char* name, bool required, std::string& reason) {
  slot = reinterpret_cast<Fn>(dlsym(library, name));
  if (slot == nullptr && required) {
    reason = std::string("the CUDA driver lacks ") + name + " (driver too old?)";
    return false;
  }
  return true;
}

DriverState load_driver() {
  DriverState state;
  // Tests and benchmarks (only they) load a stub driver in its place (tests/support/
  // stub_driver.cpp), to run the whole call path without a GPU.
  const char* stub = detail::environment_text("ZEROJIT_TESTING_CUDA_DRIVER");
  const std::string library_name = stub != nullptr ? stub : "libcuda.so.1";
  void* library = dlopen(library_name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = dlerror();
    state.reason = "no CUDA driver: cannot load " + library_name + " (" +
                   (error ? error : "unknown error") +
                   "); install the NVIDIA driver or run on a machine with a GPU";
    return state;
  }
  DriverApi& a = state.api;
  std::string& r = state.reason;
  // Versioned symbols are named explicitly: cuda.h maps the plain names onto these.
  const bool ok =
      resolve(library, a.cuInit, "cuInit", true, r) &&
      resolve(library, a.cuDriverGetVersion, "cuDriverGetVersion", true, r) &&
      resolve(library, a.cuGetErrorName, "cuGetErrorName", true, r) &&
      resolve(library, a.cuGetErrorString, "cuGetErrorString", true, r) &&
      resolve(library, a.cuDeviceGetCount, "cuDeviceGetCount", true, r) &&
      resolve(library, a.cuDeviceGet, "cuDeviceGet", true, r) &&
      resolve(library, a.cuDeviceGetAttribute, "cuDeviceGetAttribute", true, r) &&
      resolve(library, a.cuDeviceGetName, "cuDeviceGetName", true, r) &&
      resolve(library, a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", true, r) &&
      resolve(library, a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", true, r) &&
      resolve(library, a.cuCtxSetCurrent, "cuCtxSetCurrent", true, r) &&
      resolve(library, a.cuCtxGetCurrent, "cuCtxGetCurrent", true, r) &&
      resolve(library, a.cuCtxSynchronize, "cuCtxSynchronize", true, r) &&
      resolve(library, a.cuModuleLoadData, "cuModuleLoadData", true, r) &&
      resolve(library, a.cuModuleUnload, "cuModuleUnload", true, r) &&
      resolve(library, a.cuModuleGetFunction, "cuModuleGetFunction", true, r) &&
      resolve(library, a.cuFuncGetAttribute, "cuFuncGetAttribute", true, r) &&
      resolve(library, a.cuFuncSetAttribute, "cuFuncSetAttribute", true, r) &&
      resolve(library, a.cuFuncGetParamInfo, "cuFuncGetParamInfo", false, r) &&
      resolve(library, a.cuFuncLoad, "cuFuncLoad", false, r) &&
      resolve(library, a.cuLaunchKernel, "cuLaunchKernel", true, r) &&
      resolve(library, a.cuLaunchKernelEx, "cuLaunchKernelEx", false, r) &&
      resolve(library, a.cuStreamCreate, "cuStreamCreate", true, r) &&
      resolve(library, a.cuStreamDestroy, "cuStreamDestroy_v2", true, r) &&
      resolve(library, a.cuStreamSynchronize, "cuStreamSynchronize", true, r) &&
      resolve(library, a.cuStreamIsCapturing, "cuStreamIsCapturing", true, r) &&
      resolve(library, a.cuStreamBeginCapture, "cuStreamBeginCapture_v2", true, r) &&
      resolve(library, a.cuStreamEndCapture, "cuStreamEndCapture", true, r) &&
      resolve(library, a.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", true, r) &&
      resolve(library, a.cuGraphLaunch, "cuGraphLaunch", true, r) &&
      resolve(library, a.cuGraphDestroy, "cuGraphDestroy", true, r) &&
      resolve(library, a.cuGraphExecDestroy, "cuGraphExecDestroy", true, r) &&
      resolve(library, a.cuMemAlloc, "cuMemAlloc_v2", true, r) &&
      resolve(library, a.cuMemFree, "cuMemFree_v2", true, r) &&
      resolve(library, a.cuMemGetInfo, "cuMemGetInfo_v2", true, r) &&
      resolve(library, a.cuMemcpyHtoD, "cuMemcpyHtoD_v2", true, r) &&
      resolve(library, a.cuMemcpyDtoH, "cuMemcpyDtoH_v2", true, r) &&
      resolve(library, a.cuMemcpyDtoD, "cuMemcpyDtoD_v2", true, r) &&
      resolve(library, a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", true, r) &&
      resolve(library, a.cuMemcpyPeer, "cuMemcpyPeer", false, r) &&
      resolve(library, a.cuMemsetD8, "cuMemsetD8_v2", true, r) &&
      resolve(library, a.cuMemsetD8Async, "cuMemsetD8Async", true, r) &&
      resolve(library, a.cuEventCreate, "cuEventCreate", true, r) &&
      resolve(library, a.cuEventDestroy, "cuEventDestroy_v2", true, r) &&
      resolve(library, a.cuEventRecord, "cuEventRecord", true, r) &&
      resolve(library, a.cuEventSynchronize, "cuEventSynchronize", true, r) &&
      (resolve(library, a.cuEventElapsedTime, "cuEventElapsedTime_v2", false, r),
       a.cuEventElapsedTime != nullptr ||
           resolve(library, a.cuEventElapsedTime, "cuEventElapsedTime", true, r));
  if (!ok) return state;
  const Result init = a.cuInit(0);
  if (init != kSuccess) {
    const char* name = nullptr;
    a.cuGetErrorName(init, &name);
    state.reason = std::string("the CUDA driver did not initialize: cuInit failed with ") +
                   (name ? name : "an unknown error") +
                   " (no usable GPU, or CUDA_VISIBLE_DEVICES hides them all?)";
    return state;
  }
  state.loaded = true;
  return state;
}

const DriverState& driver_state() {
  static const DriverState state = load_driver();
  return state;
}

constexpr int kMaxPrimaryContexts = 64;

struct PrimaryContexts {
  std::mutex mutex;
  std::vector<Context> contexts;
  std::array<std::atomic<Context>, kMaxPrimaryContexts> fast{};  // contexts[i], once retained
};

PrimaryContexts& primary_contexts() {
  static PrimaryContexts contexts;
  return contexts;
}

}  // namespace

bool driver_available() { return driver_state().loaded; }

std::string driver_unavailable_reason() { return driver_state().reason; }

const DriverApi& driver() {
  const DriverState& state = driver_state();
  if (!state.loaded) throw UnavailableError(state.reason);
  return state.api;
}

std::string error_name(Result result) {
  const DriverState& state = driver_state();
  const char* name = nullptr;
  if (state.api.cuGetErrorName != nullptr) state.api.cuGetErrorName(result, &name);
  return name ? name : "CUDA_ERROR_" + std::to_string(result);
}

void check(Result result, std::string_view call) {
  if (result == kSuccess) return;
  const DriverState& state = driver_state();
  const char* text = nullptr;
  if (state.api.cuGetErrorString != nullptr) state.api.cuGetErrorString(result, &text);
  throw CudaError(std::string(call), result, error_name(result), text ? text : "");
}

int device_count() {
  if (!driver_available()) return 0;
  int count = 0;
  if (driver().cuDeviceGetCount(&count) != kSuccess) return 0;
  return count;
}

DeviceInfo device_info(int ordinal) {
  const DriverApi& api = driver();
  DeviceHandle device = 0;
  check(api.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  check(api.cuDeviceGetName(name, sizeof name, device), "cuDeviceGetName");
  info.name = name;
  int l2 = 0;
  check(api.cuDeviceGetAttribute(&info.compute_major, kAttributeComputeCapabilityMajor, device),
        "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)");
  check(api.cuDeviceGetAttribute(&info.compute_minor, kAttributeComputeCapabilityMinor, device),
        "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
  check(api.cuDeviceGetAttribute(&info.multiprocessors, kAttributeMultiprocessorCount, device),
        "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  check(api.cuDeviceGetAttribute(&l2, kAttributeL2CacheSize, device),
        "cuDeviceGetAttribute(L2_CACHE_SIZE)");
  info.l2_cache_bytes = l2;
  return info;
}

int multiprocessor_count(int ordinal) noexcept {
  // One slot per device, as for the primary contexts; 0 = not read yet. Racing first readers
  // both ask the driver and store the same value.
  static std::array<std::atomic<int>, kMaxPrimaryContexts> cached{};
  const bool cacheable = ordinal >= 0 && ordinal < static_cast<int>(cached.size());
  if (cacheable) {
    if (const int known =
            cached[static_cast<std::size_t>(ordinal)].load(std::memory_order_relaxed)) {
      return known;
    }
  }
  int count = kFallbackMultiprocessors;
  if (ordinal >= 0 && driver_available()) {
    const DriverApi& api = driver();
    DeviceHandle device = 0;
    int value = 0;
    if (api.cuDeviceGet(&device, ordinal) == kSuccess &&
        api.cuDeviceGetAttribute(&value, kAttributeMultiprocessorCount, device) == kSuccess &&
        value > 0) {
      count = value;
    }
  }
  if (cacheable) cached[static_cast<std::size_t>(ordinal)].store(count, std::memory_order_relaxed);
  return count;
}

std::string target_arch_for(int compute_major, int compute_minor) {
  const int sm = compute_major * 10 + compute_minor;
  // Architectures with an arch-specific ("a") target in CUDA 13.
  const bool has_specific =
      sm == 90 || sm == 100 || sm == 103 || sm == 110 || sm == 120 || sm == 121;
  return "sm_" + std::to_string(sm) + (has_specific ? "a" : "");
}

namespace {

// The primary context of a device, retained once per process and read lock-free afterwards:
// a launch from Python makes its device current for every call.
Context primary_context(int ordinal) {
  PrimaryContexts& primary = primary_contexts();
  if (ordinal >= 0 && ordinal < kMaxPrimaryContexts) {
    if (Context cached =
            primary.fast[static_cast<std::size_t>(ordinal)].load(std::memory_order_acquire)) {
      return cached;
    }
  }
  const DriverApi& api = driver();
  std::lock_guard lock(primary.mutex);
  if (static_cast<int>(primary.contexts.size()) <= ordinal) {
    primary.contexts.resize(static_cast<std::size_t>(ordinal) + 1, nullptr);
  }
  Context& slot = primary.contexts[static_cast<std::size_t>(ordinal)];
  if (slot == nullptr) {
    DeviceHandle device = 0;
    check(api.cuDeviceGet(&device, ordinal), "cuDeviceGet");
    check(api.cuDevicePrimaryCtxRetain(&slot, device), "cuDevicePrimaryCtxRetain");
  }
  if (ordinal < kMaxPrimaryContexts) {
    primary.fast[static_cast<std::size_t>(ordinal)].store(slot, std::memory_order_release);
  }
  return slot;
}

}  // namespace

void make_device_current(int ordinal) {
  check(driver().cuCtxSetCurrent(primary_context(ordinal)), "cuCtxSetCurrent");
}

ScopedDevice::ScopedDevice(int ordinal) {
  const DriverApi& api = driver();
  check(api.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
  const Context context = primary_context(ordinal);
  if (previous_ == context) {
    previous_ = nullptr;  // already current: nothing to switch, nothing to restore
    return;
  }
  check(api.cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

ScopedDevice::~ScopedDevice() {
  // Nothing to report from a destructor: a failure here leaves the device's context current,
  // the behaviour of a thread that had none.
  if (previous_ != nullptr) driver().cuCtxSetCurrent(previous_);
}

bool stream_is_capturing(Stream stream) {
  int status = kStreamCaptureStatusNone;
  check(driver().cuStreamIsCapturing(stream, &status), "cuStreamIsCapturing");
  return status != kStreamCaptureStatusNone;
}

}  // namespace zerojit::cuda

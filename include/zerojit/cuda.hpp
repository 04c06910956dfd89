// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1").
//
// zerojit links no CUDA library: the tool and the library start on a machine without a GPU,
// and only a feature that needs the driver throws UnavailableError saying what is missing.
// The handle types are the driver's own (CUstream is `CUstream_st*`), so streams from other
// libraries (PyTorch's, the runtime API's) pass straight through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

// Opaque driver handle types, declared exactly as cuda.h declares them.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;

namespace zerojit::cuda {

using Result = int;  // CUresult
using DeviceHandle = int;
using Context = CUctx_st*;
using Module = CUmod_st*;
using Function = CUfunc_st*;
using Stream = CUstream_st*;
using Event = CUevent_st*;
using Graph = CUgraph_st*;
using GraphExec = CUgraphExec_st*;
using DevicePtr = unsigned long long;  // CUdeviceptr

// The handful of driver constants zerojit uses (values from cuda.h; a test checks them
// against the real header where one is installed).
inline constexpr Result kSuccess = 0;
inline constexpr Result kErrorNotFound = 500;
inline constexpr int kAttributeMultiprocessorCount = 16;
inline constexpr int kAttributeL2CacheSize = 38;
inline constexpr int kAttributeComputeCapabilityMajor = 75;
inline constexpr int kAttributeComputeCapabilityMinor = 76;
inline constexpr int kFuncAttributeMaxThreadsPerBlock = 0;
inline constexpr int kFuncAttributeNumRegs = 4;
inline constexpr int kFuncAttributeMaxDynamicSharedSizeBytes = 8;
inline constexpr int kStreamNonBlocking = 1;
inline constexpr int kStreamCaptureStatusNone = 0;
inline constexpr int kStreamCaptureStatusActive = 1;
inline constexpr int kStreamCaptureModeGlobal = 0;
inline constexpr int kStreamCaptureModeThreadLocal = 1;
inline constexpr int kStreamCaptureModeRelaxed = 2;
inline constexpr int kEventDefault = 0;
inline constexpr int kAttributeMaxSharedMemoryPerBlockOptin = 97;
inline constexpr int kFuncAttributeNonPortableClusterSizeAllowed = 14;
inline constexpr int kLaunchAttributeCooperative = 2;
inline constexpr int kLaunchAttributeClusterDimension = 4;
inline constexpr int kLaunchAttributeClusterSchedulingPolicyPreference = 5;
inline constexpr int kLaunchAttributeProgrammaticStreamSerialization = 6;
inline constexpr int kClusterSchedulingPolicySpread = 1;

// CUlaunchAttribute and CUlaunchConfig, laid out as cuda.h lays them out (test_cuda_constants
// compares sizes and offsets where the header is installed).
struct LaunchAttribute {
  int id = 0;
  char pad[4] = {};
  union Value {
    char pad[64];
    int flag;  // cooperative, programmatic stream serialization, cluster scheduling policy
    struct {
      unsigned x, y, z;
    } cluster;
  } value{};
};
struct LaunchConfig {
  unsigned grid_x, grid_y, grid_z;
  unsigned block_x, block_y, block_z;
  unsigned shared_bytes;
  Stream stream;
  LaunchAttribute* attributes;
  unsigned attribute_count;
};

// Function table of the driver. Entries marked optional are null on drivers that lack them.
struct DriverApi {
  Result (*cuInit)(unsigned int flags);
  Result (*cuDriverGetVersion)(int* version);
  Result (*cuGetErrorName)(Result error, const char** name);
  Result (*cuGetErrorString)(Result error, const char** text);
  Result (*cuDeviceGetCount)(int* count);
  Result (*cuDeviceGet)(DeviceHandle* device, int ordinal);
  Result (*cuDeviceGetAttribute)(int* value, int attribute, DeviceHandle device);
  Result (*cuDeviceGetName)(char* name, int length, DeviceHandle device);
  Result (*cuDevicePrimaryCtxRetain)(Context* context, DeviceHandle device);
  Result (*cuDevicePrimaryCtxRelease)(DeviceHandle device);
  Result (*cuCtxSetCurrent)(Context context);
  Result (*cuCtxGetCurrent)(Context* context);
  Result (*cuCtxSynchronize)();
  Result (*cuModuleLoadData)(Module* module, const void* image);
  Result (*cuModuleUnload)(Module module);
  Result (*cuModuleGetFunction)(Function* function, Module module, const char* name);
  Result (*cuFuncGetAttribute)(int* value, int attribute, Function function);
  Result (*cuFuncSetAttribute)(Function function, int attribute, int value);
  Result (*cuFuncGetParamInfo)(Function function, std::size_t index, std::size_t* offset,
                               std::size_t* size);  // optional (CUDA 12.4+)
  Result (*cuFuncLoad)(Function function);          // optional (CUDA 12.4+)
  Result (*cuLaunchKernel)(Function function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                           unsigned block_x, unsigned block_y, unsigned block_z,
                           unsigned shared_bytes, Stream stream, void** params, void** extra);
  // Optional (CUDA 12.0+): launches that carry attributes (launch.hpp) need it.
  Result (*cuLaunchKernelEx)(const LaunchConfig* config, Function function, void** params,
                             void** extra);
  Result (*cuStreamCreate)(Stream* stream, unsigned int flags);
  Result (*cuStreamDestroy)(Stream stream);
  Result (*cuStreamSynchronize)(Stream stream);
  Result (*cuStreamIsCapturing)(Stream stream, int* status);
  Result (*cuStreamBeginCapture)(Stream stream, int mode);
  Result (*cuStreamEndCapture)(Stream stream, Graph* graph);
  Result (*cuGraphInstantiateWithFlags)(GraphExec* exec, Graph graph, unsigned long long flags);
  Result (*cuGraphLaunch)(GraphExec exec, Stream stream);
  Result (*cuGraphDestroy)(Graph graph);
  Result (*cuGraphExecDestroy)(GraphExec exec);
  Result (*cuMemAlloc)(DevicePtr* pointer, std::size_t bytes);
  Result (*cuMemFree)(DevicePtr pointer);
  Result (*cuMemGetInfo)(std::size_t* free_bytes, std::size_t* total_bytes);
  Result (*cuMemcpyHtoD)(DevicePtr dst, const void* src, std::size_t bytes);
  Result (*cuMemcpyDtoH)(void* dst, DevicePtr src, std::size_t bytes);
  Result (*cuMemcpyDtoD)(DevicePtr dst, DevicePtr src, std::size_t bytes);
  Result (*cuMemcpyDtoDAsync)(DevicePtr dst, DevicePtr src, std::size_t bytes, Stream stream);
  // Optional (the library itself never copies between devices; the multi-GPU tests do).
  Result (*cuMemcpyPeer)(DevicePtr dst, Context dst_context, DevicePtr src, Context src_context,
                         std::size_t bytes);
  Result (*cuMemsetD8)(DevicePtr dst, unsigned char value, std::size_t count);
  Result (*cuMemsetD8Async)(DevicePtr dst, unsigned char value, std::size_t count, Stream stream);
  Result (*cuEventCreate)(Event* event, unsigned int flags);
  Result (*cuEventDestroy)(Event event);
  Result (*cuEventRecord)(Event event, Stream stream);
  Result (*cuEventSynchronize)(Event event);
  Result (*cuEventElapsedTime)(float* milliseconds, Event start, Event end);
};

// Whether libcuda.so.1 could be loaded and initialized. Never throws.
bool driver_available();
// Why it could not (empty when it could).
std::string driver_unavailable_reason();
// The loaded driver; throws UnavailableError (with the reason) when there is none.
const DriverApi& driver();

// Throws CudaError("<call>", code, name) unless result is success.
void check(Result result, std::string_view call);
std::string error_name(Result result);

// Number of CUDA devices; 0 when there is no driver or no device (never throws).
int device_count();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  std::int64_t l2_cache_bytes = 0;
};
DeviceInfo device_info(int ordinal);

// What launch plans size their grids by when the device is unknown (no driver, no such device,
// a null backend in tests): the SM count of an H100 / H200.
inline constexpr int kFallbackMultiprocessors = 132;
// The device's SM count, read from the driver once per device and lock-free afterwards, so a
// launch plan may size its grid by it on every call; kFallbackMultiprocessors when the driver
// or the device is not there. Never throws.
int multiprocessor_count(int ordinal) noexcept;

// The NVRTC target for a device: the architecture-specific variant where one exists
// (compute 9.0 -> "sm_90a", 10.0 -> "sm_100a"), so kernels may use wgmma, setmaxnreg, the
// Blackwell conversions; else the plain "sm_XY".
std::string target_arch_for(int compute_major, int compute_minor);

// Makes the device's primary context current on the calling thread (retaining it once per
// process). Kernels launch in whatever context is current, as with any CUDA library.
void make_device_current(int ordinal);

// Makes the device's primary context current for a scope (a module load, a launch from Python),
// then puts back the context the thread had: loading for device 1 never leaves a caller that
// works on device 0 in device 1's context. A thread that had no current context keeps the
// device's, so that its launches find a context as they did before.
class ScopedDevice {
 public:
  explicit ScopedDevice(int ordinal);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  Context previous_ = nullptr;
};

// Whether the stream is being captured into a CUDA graph.
bool stream_is_capturing(Stream stream);

}  // namespace zerojit::cuda

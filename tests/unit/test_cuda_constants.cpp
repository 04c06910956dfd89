// zerojit declares the few CUDA driver types and constants it uses itself, so that it builds
// without the CUDA toolkit. Where the toolkit's cuda.h is installed, check them against it.
#include <gtest/gtest.h>

#include <cstddef>
#include <type_traits>

#include "zerojit/cuda.hpp"
#include "zerojit/error.hpp"

#if __has_include(<cuda.h>)
#include <cuda.h>
#define ZEROJIT_HAVE_CUDA_H 1
#endif

namespace zerojit {
namespace {

#ifdef ZEROJIT_HAVE_CUDA_H
static_assert(std::is_same_v<cuda::Context, CUcontext>);
static_assert(std::is_same_v<cuda::Module, CUmodule>);
static_assert(std::is_same_v<cuda::Function, CUfunction>);
static_assert(std::is_same_v<cuda::Stream, CUstream>);
static_assert(std::is_same_v<cuda::Event, CUevent>);
static_assert(std::is_same_v<cuda::Graph, CUgraph>);
static_assert(std::is_same_v<cuda::GraphExec, CUgraphExec>);
static_assert(std::is_same_v<cuda::DevicePtr, CUdeviceptr>);
static_assert(sizeof(cuda::DeviceHandle) == sizeof(CUdevice));
static_assert(cuda::kSuccess == CUDA_SUCCESS);
static_assert(cuda::kErrorNotFound == CUDA_ERROR_NOT_FOUND);
static_assert(cuda::kAttributeMultiprocessorCount == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
static_assert(cuda::kAttributeL2CacheSize == CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
static_assert(cuda::kAttributeComputeCapabilityMajor ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(cuda::kAttributeComputeCapabilityMinor ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(cuda::kFuncAttributeMaxThreadsPerBlock == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
static_assert(cuda::kFuncAttributeNumRegs == CU_FUNC_ATTRIBUTE_NUM_REGS);
static_assert(cuda::kFuncAttributeMaxDynamicSharedSizeBytes ==
              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
static_assert(cuda::kStreamNonBlocking == CU_STREAM_NON_BLOCKING);
static_assert(cuda::kStreamCaptureStatusNone == CU_STREAM_CAPTURE_STATUS_NONE);
static_assert(cuda::kStreamCaptureStatusActive == CU_STREAM_CAPTURE_STATUS_ACTIVE);
static_assert(cuda::kStreamCaptureModeGlobal == CU_STREAM_CAPTURE_MODE_GLOBAL);
static_assert(cuda::kStreamCaptureModeThreadLocal == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
static_assert(cuda::kStreamCaptureModeRelaxed == CU_STREAM_CAPTURE_MODE_RELAXED);
static_assert(cuda::kEventDefault == CU_EVENT_DEFAULT);
static_assert(cuda::kAttributeMaxSharedMemoryPerBlockOptin ==
              CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
static_assert(cuda::kFuncAttributeNonPortableClusterSizeAllowed ==
              CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
static_assert(cuda::kLaunchAttributeCooperative == CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
static_assert(cuda::kLaunchAttributeClusterDimension == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
static_assert(cuda::kLaunchAttributeClusterSchedulingPolicyPreference ==
              CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
static_assert(cuda::kLaunchAttributeProgrammaticStreamSerialization ==
              CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
static_assert(cuda::kClusterSchedulingPolicySpread == CU_CLUSTER_SCHEDULING_POLICY_SPREAD);
static_assert(sizeof(cuda::LaunchAttribute) == sizeof(CUlaunchAttribute));
static_assert(offsetof(cuda::LaunchAttribute, value) == offsetof(CUlaunchAttribute, value));
static_assert(sizeof(cuda::LaunchConfig) == sizeof(CUlaunchConfig));
static_assert(offsetof(cuda::LaunchConfig, stream) == offsetof(CUlaunchConfig, hStream));
static_assert(offsetof(cuda::LaunchConfig, attributes) == offsetof(CUlaunchConfig, attrs));
static_assert(offsetof(cuda::LaunchConfig, attribute_count) == offsetof(CUlaunchConfig, numAttrs));
#endif

TEST(CudaDeclarations, MatchTheToolkitHeaderWhereInstalled) {
#ifndef ZEROJIT_HAVE_CUDA_H
  GTEST_SKIP() << "cuda.h not found: the declarations were not compared";
#endif
  SUCCEED();  // the comparisons are the static_asserts above
}

TEST(CudaDeclarations, NoDriverMeansAClearErrorNotACrash) {
  if (cuda::driver_available()) GTEST_SKIP() << "a CUDA driver is installed here";
  EXPECT_EQ(cuda::device_count(), 0);
  try {
    cuda::driver();
    FAIL() << "expected UnavailableError";
  } catch (const UnavailableError& error) {
    EXPECT_NE(std::string(error.what()).find("libcuda.so.1"), std::string::npos) << error.what();
  }
}

// Launch plans size grids by the SM count; without a device they still get one.
TEST(CudaDeclarations, MultiprocessorCountFallsBackWhereThereIsNoSuchDevice) {
  EXPECT_EQ(cuda::multiprocessor_count(-1), cuda::kFallbackMultiprocessors);
  EXPECT_EQ(cuda::multiprocessor_count(1 << 20), cuda::kFallbackMultiprocessors);
  if (cuda::device_count() == 0) {
    EXPECT_EQ(cuda::multiprocessor_count(0), cuda::kFallbackMultiprocessors);
  } else {
    EXPECT_EQ(cuda::multiprocessor_count(0), cuda::device_info(0).multiprocessors);
    EXPECT_EQ(cuda::multiprocessor_count(0), cuda::multiprocessor_count(0));  // cached
  }
}

}  // namespace
}  // namespace zerojit

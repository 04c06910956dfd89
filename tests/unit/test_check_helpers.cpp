// The public check helpers of zerojit/testing.hpp on the CPU: comparisons within tolerances,
// the 16-bit float conversions, and the skip reason without a GPU. (Their device buffers and
// streams run in the GPU tests, which use them.) And the device headers a consumer's kernel
// includes: every dtype's rendering compiles against zerojit/device/types.cuh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "examples/examples.hpp"
#include "support/core_fixture.hpp"
#include "zerojit/testing.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit {
namespace {

TEST(CheckCompare, PassesWithinTheToleranceAndReportsEachFailure) {
  const std::vector<float> expected = {1.0f, 2.0f, -3.0f, 0.0f};
  EXPECT_EQ(testing::compare("y", expected, expected), "");
  const std::vector<float> close = {1.0f + 1e-6f, 2.0f, -3.0f, 1e-7f};
  EXPECT_EQ(testing::compare("y", close, expected, {.absolute = 1e-6, .relative = 1e-6}), "");

  // Exact by default: one element off is named with its index, values and the count.
  const std::string report = testing::compare("y", close, expected);
  EXPECT_NE(report.find("y: 2 of 4 elements"), std::string::npos) << report;
  EXPECT_NE(report.find("[0] expected 1, got 1.00000095"), std::string::npos) << report;
  EXPECT_NE(report.find("[3] expected 0, got"), std::string::npos) << report;
  // The relative part scales with the expected value.
  const std::vector<double> big = {1000.0}, off = {1000.5};
  EXPECT_EQ(testing::compare("z", off, big, {.relative = 1e-3}), "");
  EXPECT_NE(testing::compare("z", off, big, {.relative = 1e-4}), "");
  // Only the first `show` failures are listed.
  const std::vector<int> zeros(20, 0), ones(20, 1);
  const std::string many = testing::compare("n", ones, zeros, {}, 3);
  EXPECT_NE(many.find("20 of 20"), std::string::npos) << many;
  EXPECT_NE(many.find("[2]"), std::string::npos) << many;
  EXPECT_EQ(many.find("[3]"), std::string::npos) << many;
  EXPECT_NE(many.find("..."), std::string::npos) << many;
}

TEST(CheckCompare, NanAndInfinityMatchOnlyThemselvesAndSizesMustAgree) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> expected = {nan, inf, -inf};
  EXPECT_EQ(testing::compare("y", expected, expected), "");
  EXPECT_NE(testing::compare("y", std::vector<float>{0.0f, inf, -inf}, expected, {.absolute = 1e9}),
            "");
  EXPECT_NE(testing::compare("y", std::vector<float>{nan, -inf, -inf}, expected, {.absolute = 1e9}),
            "");
  EXPECT_NE(
      testing::compare("y", std::vector<float>{nan, inf}, expected).find("2 elements, expected 3"),
      std::string::npos);
}

TEST(CheckHalfFloats, RoundToNearestEvenAsTheDevice) {
  EXPECT_EQ(testing::float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(testing::bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(testing::bf16_to_float(0xC040), -3.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1); a little more rounds up.
  EXPECT_EQ(testing::float_to_bf16(1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(testing::float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
  EXPECT_TRUE(std::isnan(testing::bf16_to_float(testing::float_to_bf16(NAN))));

  EXPECT_EQ(testing::float_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(testing::f16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(testing::float_to_f16(-2.5f), 0xC100);
  EXPECT_EQ(testing::float_to_f16(65504.0f), 0x7BFF);  // the largest finite
  EXPECT_EQ(testing::float_to_f16(65520.0f), 0x7C00);  // halfway to the next: to infinity
  EXPECT_EQ(testing::float_to_f16(0x1p-24f), 0x0001);  // the smallest subnormal
  EXPECT_EQ(testing::f16_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(testing::float_to_f16(0x1p-25f), 0x0000);         // halfway to it: to even (zero)
  EXPECT_EQ(testing::float_to_f16(1.0f + 0x1p-11f), 0x3C00);  // halfway: to even
  EXPECT_EQ(testing::float_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
  EXPECT_TRUE(std::isnan(testing::f16_to_float(testing::float_to_f16(NAN))));
  EXPECT_EQ(testing::f16_to_float(0x7C00), std::numeric_limits<float>::infinity());
  // Every f16 value survives the round trip through float.
  for (int bits = 0; bits < 0x10000; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    const float value = testing::f16_to_float(half);
    if (std::isnan(value)) continue;
    ASSERT_EQ(testing::float_to_f16(value), half) << bits;
  }
}

TEST(CheckGpu, SaysWhyNoGpuCanRunACheck) {
  const std::string why = testing::gpu_unavailable_reason();
  if (cuda::device_count() > 0) {
    EXPECT_EQ(why, "");
  } else {
    EXPECT_EQ(why, cuda::driver_available() ? "no CUDA device: the driver reports none"
                                            : cuda::driver_unavailable_reason());
    EXPECT_FALSE(why.empty());
  }
}

TEST(CheckGpu, ATensorLargerThanItsBufferIsRefused) {
  if (cuda::device_count() == 0) GTEST_SKIP() << testing::gpu_unavailable_reason();
  testing::DeviceBuffer buffer(16);
  EXPECT_EQ(buffer.tensor(DType::f32, {4}).desc.shape[0], 4);
  EXPECT_THROW(buffer.tensor(DType::f32, {5}), std::invalid_argument);
}

// Each dtype renders as a type that zerojit/device/types.cuh (or C++ itself) declares: one
// NVRTC compile instantiating a kernel template with every one of them.
using DeviceTypes = testing::CoreTest;
TEST_F(DeviceTypes, EveryDtypeRendersAsATypeTheDeviceHeadersDeclare) {
  const EmbeddedFile* types = examples::embedded_files().find("zerojit/device/types.cuh");
  ASSERT_NE(types, nullptr) << "the example kernels embed zerojit's device headers";
  const EmbeddedFile files[] = {
      {"probe.cu",
       "#include \"zerojit/device/types.cuh\"\n"
       "template <typename T> __global__ void probe(T* out) { out[0] = T{}; }\n"},
      *types,
  };
  const EmbeddedFileSet set{files};
  Program program;
  program.kernel_name = "test.device_types";
  program.files = &set;
  program.source_path = "probe.cu";
  program.key_text = "every dtype";
  for (int i = 0; i < kDTypeCount; ++i) {
    const std::string rendered = render_template_value(static_cast<DType>(i));
    // The same type twice is one instantiation; NVRTC refuses duplicate name expressions.
    const std::string expression = "probe<" + rendered + ">";
    if (std::find(program.name_expressions.begin(), program.name_expressions.end(), expression) ==
        program.name_expressions.end()) {
      program.name_expressions.push_back(expression);
    }
  }
  if (!nvrtc_available()) GTEST_SKIP() << "no NVRTC: " << nvrtc_unavailable_reason();
  const CompiledArtifact artifact =
      compile_program(program, "sm_90a", compute_identity(program, "sm_90a", nvrtc_version()));
  EXPECT_EQ(artifact.lowered_names.size(), program.name_expressions.size());
}

}  // namespace
}  // namespace zerojit

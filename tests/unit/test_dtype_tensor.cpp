#include <gtest/gtest.h>

#include "zerojit/dtype.hpp"
#include "zerojit/tensor.hpp"

namespace zerojit {
namespace {

TEST(DType, MapsDLPackCodes) {
  EXPECT_EQ(dtype_from_dlpack({2, 32, 1}), DType::f32);
  EXPECT_EQ(dtype_from_dlpack({4, 16, 1}), DType::bf16);
  EXPECT_EQ(dtype_from_dlpack({2, 16, 1}), DType::f16);
  EXPECT_EQ(dtype_from_dlpack({0, 32, 1}), DType::i32);
  EXPECT_EQ(dtype_from_dlpack({0, 64, 1}), DType::i64);
  EXPECT_EQ(dtype_from_dlpack({1, 8, 1}), DType::u8);
  EXPECT_EQ(dtype_from_dlpack({10, 8, 1}), DType::e4m3);
  EXPECT_EQ(dtype_from_dlpack({12, 8, 1}), DType::e5m2);
  EXPECT_EQ(dtype_from_dlpack({14, 8, 1}), DType::ue8m0);
  EXPECT_EQ(dtype_from_dlpack({17, 4, 1}), DType::e2m1x2);
  EXPECT_EQ(dtype_from_dlpack({6, 8, 1}), DType::boolean);
  EXPECT_FALSE(dtype_from_dlpack({5, 64, 1}).has_value());  // complex
  EXPECT_FALSE(dtype_from_dlpack({2, 32, 4}).has_value());  // vector lanes
  EXPECT_FALSE(dtype_from_dlpack({8, 8, 1}).has_value());   // e4m3 (not FN)
  for (int i = 0; i < kDTypeCount; ++i) {
    const auto dtype = static_cast<DType>(i);
    EXPECT_EQ(dtype_from_dlpack(dtype_to_dlpack(dtype)), dtype) << dtype_name(dtype);
    EXPECT_EQ(parse_dtype(dtype_name(dtype)), dtype);
  }
}

TEST(DType, SizesAndDeviceNames) {
  EXPECT_EQ(dtype_size_bytes(DType::bf16), 2);
  EXPECT_EQ(dtype_size_bytes(DType::e2m1x2), 1);
  EXPECT_EQ(dtype_size_bytes(DType::i64), 8);
  EXPECT_EQ(device_type_name(DType::f32), "float");
  EXPECT_EQ(device_type_name(DType::bf16), "zj::bf16_t");
}

TEST(TensorDesc, ContiguousStridesAndChecks) {
  const auto desc = TensorDesc::contiguous(DType::bf16, {8, 64, 128});
  EXPECT_EQ(desc.ndim, 3);
  EXPECT_EQ(desc.stride(0), 64 * 128);
  EXPECT_EQ(desc.stride(1), 128);
  EXPECT_EQ(desc.stride(2), 1);
  EXPECT_EQ(desc.numel(), 8 * 64 * 128);
  EXPECT_TRUE(desc.is_contiguous());
  const std::int64_t shape[] = {4, 3, 584};
  const std::int64_t strides[] = {1728, 584, 1};
  const auto paged = TensorDesc::strided(DType::u8, shape, strides);
  EXPECT_FALSE(paged.is_contiguous());
  EXPECT_TRUE(paged.is_contiguous_inner(2));
  EXPECT_EQ(to_string(TensorDesc::contiguous(DType::f32, {2, 3})),
            "f32[2, 3] strides=[3, 1] align=256 cuda:0");
}

TEST(TensorDesc, AlignmentFromPointer) {
  EXPECT_EQ(pointer_alignment(reinterpret_cast<void*>(0x1000)), 256);
  EXPECT_EQ(pointer_alignment(reinterpret_cast<void*>(0x1010)), 16);
  EXPECT_EQ(pointer_alignment(reinterpret_cast<void*>(0x1002)), 2);
  EXPECT_EQ(make_tensor_ref(reinterpret_cast<void*>(0x1008), TensorDesc{}).desc.alignment, 8);
}

}  // namespace
}  // namespace zerojit

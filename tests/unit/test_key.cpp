#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <unordered_set>

#include "zerojit/key.hpp"

namespace zerojit {
namespace {

struct SampleKey {
  int head_dim = 128;
  DType dtype = DType::bf16;
  bool gather = true;
  long long stride = 39168;

  static constexpr auto fields() {
    return std::tuple{field("head_dim", &SampleKey::head_dim), field("dtype", &SampleKey::dtype),
                      field("gather", &SampleKey::gather), field("stride", &SampleKey::stride)};
  }
  auto operator<=>(const SampleKey&) const = default;
};

struct FloatKey {
  float fp8_max = 448.0f;
  int block = 64;
  static constexpr auto fields() {
    return std::tuple{field("fp8_max", &FloatKey::fp8_max), field("block", &FloatKey::block)};
  }
  auto operator<=>(const FloatKey&) const = default;
};

TEST(CompileKey, PrintsFieldEqualsValueInDeclaredOrder) {
  EXPECT_EQ(describe(SampleKey{}), "head_dim=128, dtype=bf16, gather=true, stride=39168");
}

TEST(CompileKey, RendersJson) {
  EXPECT_EQ(to_json_text(SampleKey{}),
            R"({"head_dim":128,"dtype":"bf16","gather":true,"stride":39168})");
  EXPECT_EQ(to_json_text(FloatKey{}), R"({"fp8_max":448,"block":64})");
}

TEST(CompileKey, RendersTemplateArguments) {
  EXPECT_EQ(template_arguments(SampleKey{}), "128, zj::bf16_t, true, 39168");
  SampleKey big;
  big.stride = 1LL << 40;
  big.dtype = DType::f32;
  big.gather = false;
  EXPECT_EQ(template_arguments(big), "128, float, false, 1099511627776LL");
}

TEST(CompileKey, RendersMacroDefinitions) {
  const auto macros = macro_definitions(FloatKey{});
  ASSERT_EQ(macros.size(), 2u);
  EXPECT_EQ(macros[0], "-DZJ_FP8_MAX=(0x1.cp+8)");  // 448 exactly, as a hex float
  EXPECT_EQ(macros[1], "-DZJ_BLOCK=64");
  EXPECT_EQ(macro_definitions(SampleKey{}, "K_")[1], "-DK_DTYPE=zj::bf16_t");
}

TEST(CompileKey, HashEqualityAndOrderFollowEveryField) {
  const SampleKey base;
  SampleKey changed[4] = {base, base, base, base};
  changed[0].head_dim = 64;
  changed[1].dtype = DType::f32;
  changed[2].gather = false;
  changed[3].stride = 1728;
  std::unordered_set<std::uint64_t> hashes{key_hash(base)};
  std::set<SampleKey> ordered{base};
  for (const auto& key : changed) {
    EXPECT_NE(key, base);
    hashes.insert(key_hash(key));
    ordered.insert(key);
  }
  EXPECT_EQ(hashes.size(), 5u);
  EXPECT_EQ(ordered.size(), 5u);
  EXPECT_EQ(key_hash(SampleKey{}), key_hash(base));
}

}  // namespace
}  // namespace zerojit

#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <unordered_set>

#include "zerojit/dynamic_key.hpp"
#include "zerojit/error.hpp"
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

TEST(CompileKey, ReadsItsDescriptionBack) {
  SampleKey sample;
  sample.head_dim = -7;
  sample.dtype = DType::f32;
  sample.gather = false;
  sample.stride = 1LL << 40;
  EXPECT_EQ(key_from_text<SampleKey>(describe(sample)), sample);
  EXPECT_EQ(key_from_text<SampleKey>(describe(SampleKey{})), SampleKey{});
  FloatKey odd;
  odd.fp8_max = 0.1f;  // not a short decimal: the shortest round-trip form reads back exactly
  EXPECT_EQ(key_from_text<FloatKey>(describe(odd)), odd);
}

TEST(CompileKey, RefusesTextThatIsNotItsDescription) {
  const auto refusal = [](std::string_view text) {
    try {
      (void)key_from_text<SampleKey>(text);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(refusal("head_dim=128, dtype=bf16, gather=true").find("expected field 'stride'"),
            std::string::npos);
  EXPECT_NE(refusal("dtype=bf16, head_dim=128, gather=true, stride=1").find("'head_dim'"),
            std::string::npos);
  EXPECT_NE(refusal("head_dim=12x, dtype=bf16, gather=true, stride=1").find("'head_dim'"),
            std::string::npos);
  EXPECT_NE(refusal("head_dim=1, dtype=bf17, gather=true, stride=1").find("'dtype'"),
            std::string::npos);
  EXPECT_NE(refusal("head_dim=1, dtype=bf16, gather=yes, stride=1").find("'gather'"),
            std::string::npos);
  EXPECT_NE(refusal("head_dim=4294967296, dtype=bf16, gather=true, stride=1").find("range"),
            std::string::npos);
  EXPECT_NE(refusal("head_dim=1, dtype=bf16, gather=true, stride=1, extra=2").find("'extra'"),
            std::string::npos);
  EXPECT_NE(refusal("head_dim=1, dtype").find("name=value"), std::string::npos);
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

// A key known only at run time (a Python kernel's) prints and renders as the C++ key with the
// same fields does: the same text, JSON, template arguments and macros, hence the same program
// identity.
struct MixedKey {
  DType dtype = DType::bf16;
  int width = 8;
  bool fast = true;
  std::int64_t big = 5'000'000'000;
  static constexpr auto fields() {
    return std::tuple{field("dtype", &MixedKey::dtype), field("width", &MixedKey::width),
                      field("fast", &MixedKey::fast), field("big", &MixedKey::big)};
  }
  auto operator<=>(const MixedKey&) const = default;
};

TEST(DynamicKey, RendersAsTheCppKeyWithTheSameFields) {
  const MixedKey typed;
  const DynamicKey dynamic{{{"dtype", DType::bf16},
                            {"width", std::int64_t{8}},
                            {"fast", true},
                            {"big", std::int64_t{5'000'000'000}}}};
  EXPECT_EQ(dynamic.text(), describe(typed));
  EXPECT_EQ(dynamic.json(), to_json_text(typed));
  EXPECT_EQ(dynamic.template_arguments(), template_arguments(typed));
  EXPECT_EQ(dynamic.macro_definitions("P_"), macro_definitions(typed, "P_"));
  EXPECT_EQ(dynamic.text(), "dtype=bf16, width=8, fast=true, big=5000000000");
}

TEST(DynamicKey, StringFieldsRenderVerbatim) {
  const DynamicKey key{{{"op", std::string("cuda::std::plus<>")}}};
  EXPECT_EQ(key.text(), "op=cuda::std::plus<>");
  EXPECT_EQ(key.json(), R"({"op":"cuda::std::plus<>"})");
  EXPECT_EQ(key.template_arguments(), "cuda::std::plus<>");
  EXPECT_EQ(key.macro_definitions(), std::vector<std::string>{"-DZJ_OP=cuda::std::plus<>"});
}

}  // namespace
}  // namespace zerojit

// Arguments declared once (zerojit/arguments.hpp): the descriptors, the text, the operator
// schema and the family-row check derived from one declaration, and the base's promise that a
// call's key is dispatch's answer for the call's descriptors.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>

#include "zerojit/family.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit {
namespace {

template <class Tensor>
struct AxpyArguments {
  Tensor x;
  Tensor y;
  std::optional<Tensor> mask;
  float alpha = 1.0f;
  std::int64_t offset = 0;
  bool pdl = false;

  static constexpr auto fields() {
    using A = AxpyArguments;
    return std::tuple{input("x", &A::x),
                      output("y", &A::y, allocated_like(DType::f32, "x", 1, {2})),
                      input("mask", &A::mask),
                      scalar("alpha", &A::alpha),
                      scalar("offset", &A::offset),
                      launch_option("pdl", &A::pdl)};
  }
};
using AxpyArgs = AxpyArguments<TensorRef>;
using AxpyDescriptors = AxpyArguments<TensorDesc>;

static_assert(DeclaredArguments<AxpyArgs> && DeclaredArguments<AxpyDescriptors>);
static_assert(std::is_same_v<CallArgs<AxpyDescriptors>, AxpyArgs>);
static_assert(std::is_same_v<DescriptorsOf<AxpyArgs>, AxpyDescriptors>);

struct Plain {
  int value = 0;
  static constexpr auto fields() { return std::tuple{field("value", &Plain::value)}; }
};
static_assert(!DeclaredArguments<Plain>, "a non-template struct declares no call arguments");

AxpyArgs sample_args() {
  AxpyArgs args;
  static float x[8];
  static float y[16];
  args.x = make_tensor_ref(x, TensorDesc::contiguous(DType::f32, {8}, Device::cuda(0)));
  args.y = make_tensor_ref(y, TensorDesc::contiguous(DType::f32, {8, 2}, Device::cuda(0)));
  args.alpha = 2.5f;
  args.offset = 3;
  args.pdl = true;
  return args;
}

TEST(DeclaredArguments, DescriptorsAreTheLayoutsAndEveryOtherFieldAsGiven) {
  const AxpyArgs args = sample_args();
  const AxpyDescriptors descriptors = descriptors_of(args);
  EXPECT_EQ(descriptors.x, args.x.desc);
  EXPECT_EQ(descriptors.y, args.y.desc);
  EXPECT_FALSE(descriptors.mask.has_value());
  EXPECT_EQ(descriptors.alpha, 2.5f);
  EXPECT_EQ(descriptors.offset, 3);
  EXPECT_TRUE(descriptors.pdl);

  AxpyArgs masked = args;
  masked.mask = args.x;
  ASSERT_TRUE(descriptors_of(masked).mask.has_value());
  EXPECT_EQ(*descriptors_of(masked).mask, args.x.desc);
}

TEST(DeclaredArguments, CallsDescribeThemselvesAsTheirDescriptorsDo) {
  const AxpyArgs args = sample_args();
  EXPECT_EQ(describe(args), describe(descriptors_of(args)));
  EXPECT_NE(describe(args).find("mask=none"), std::string::npos) << describe(args);
  EXPECT_EQ(DescriptorText::of_args(args)(), describe(args));
}

TEST(DeclaredArguments, OperatorSchemaMarksOutputsAndDefaultsLaunchOptions) {
  EXPECT_EQ(operator_schema<AxpyArgs>(),
            "(Tensor x, Tensor(a!) y, Tensor? mask, float alpha, int offset, bool pdl=False) "
            "-> ()");
  EXPECT_EQ(operator_schema<AxpyDescriptors>(), operator_schema<AxpyArgs>());
}

TEST(DeclaredArguments, RolesAndAllocationRulesAreReadableAsData) {
  std::string roles;
  for_each_argument<AxpyArgs>([&](const auto& field) {
    roles += std::string(field.name) + ":" + std::to_string(static_cast<int>(field.role)) + " ";
    if (field.name == "y") {
      EXPECT_EQ(field.allocation.like, "x");
      EXPECT_EQ(field.allocation.leading_dims, 1);
      EXPECT_EQ(field.allocation.trailing_count, 1);
      EXPECT_EQ(field.allocation.trailing[0], 2);
    } else {
      EXPECT_TRUE(field.allocation.like.empty()) << field.name;
    }
  });
  EXPECT_EQ(roles, "x:0 y:1 mask:0 alpha:2 offset:2 pdl:3 ");
}

// --- The base calls dispatch, then plan(key, args) -------------------------------------------

struct AxpyKey {
  int vector_width = 1;
  static constexpr auto fields() {
    return std::tuple{field("vector_width", &AxpyKey::vector_width)};
  }
  auto operator<=>(const AxpyKey&) const = default;
};

struct AxpyGate {
  static constexpr auto fields() { return std::tuple{}; }
};

class AxpyKernel final : public JitKernel<AxpyKernel, AxpyKey, AxpyDescriptors> {
 public:
  AxpyKey dispatch(const AxpyDescriptors& d) const override {
    ++dispatches;
    return {d.x.size(0) % 4 == 0 ? 4 : 1};
  }
  Program program(const AxpyKey&) const override { return {}; }
  LaunchSpec<AxpyKey> plan(const AxpyKey& key, const AxpyArgs& args) const {
    LaunchSpec<AxpyKey> spec;
    spec.key = key;
    spec.geometry.grid.x = static_cast<std::uint32_t>(args.x.desc.size(0));
    spec.geometry.attributes.programmatic_serialization = args.pdl;
    return spec;
  }
  WarmupSpace<AxpyDescriptors> warmup_space(const AxpyGate&) const {
    return WarmupSpace<AxpyDescriptors>(AxpyDescriptors{});
  }

  mutable int dispatches = 0;

 private:
  friend JitKernel;
  AxpyKernel() : JitKernel("test.axpy") {}
};

TEST(DeclaredArguments, TheLaunchSpecCarriesDispatchsKeyForTheCallsDescriptors) {
  AxpyKernel& kernel = AxpyKernel::instance();
  kernel.dispatches = 0;
  AxpyArgs args = sample_args();
  const auto spec = kernel.launch_spec(args);
  EXPECT_EQ(kernel.dispatches, 1);
  EXPECT_EQ(spec.key, kernel.dispatch(descriptors_of(args)));
  EXPECT_EQ(spec.key.vector_width, 4);
  EXPECT_TRUE(spec.geometry.attributes.programmatic_serialization);
}

// A row's kernel must have a warmup space for its gate and, with declared arguments, a plan for
// a dispatched key: the concept KernelRow requires, so such a row does not compile.
class NoKeyedPlanKernel final : public JitKernel<NoKeyedPlanKernel, AxpyKey, AxpyDescriptors> {
 public:
  AxpyKey dispatch(const AxpyDescriptors&) const override { return {}; }
  Program program(const AxpyKey&) const override { return {}; }
  LaunchSpec<AxpyKey> plan(const AxpyArgs&) const { return {}; }  // the older shape only
  WarmupSpace<AxpyDescriptors> warmup_space(const AxpyGate&) const {
    return WarmupSpace<AxpyDescriptors>(AxpyDescriptors{});
  }

 private:
  friend JitKernel;
  NoKeyedPlanKernel() : JitKernel("test.no_keyed_plan") {}
};

struct OtherGate {
  static constexpr auto fields() { return std::tuple{}; }
};

static_assert(FamilyKernel<AxpyKernel, AxpyGate>);
static_assert(!FamilyKernel<NoKeyedPlanKernel, AxpyGate>,
              "declared arguments need plan(key, args)");
static_assert(!FamilyKernel<AxpyKernel, OtherGate>, "a row needs a warmup space for its gate");

}  // namespace
}  // namespace zerojit

// What an argument declaration says beyond the kernel's own arguments (zerojit/arguments.hpp),
// for the bindings that derive an op from it: the values a binding's signature restates
// (repeated_size, repeated_stride, dtype_flag), a field the route implies, an optional input's
// unit-scale default, an index tensor's bound, outputs allocated from part of a tensor's shape;
// and the family rows that share one op, a kernel per dtype of a tensor.
#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <string>
#include <tuple>

#include "zerojit/family.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit {
namespace {

// A store in the shape of the DSv4 compressor stores: vLLM's signature restates the state's
// block size, the cache's page stride and its layout (a flag that is True for full-row caches).
template <class Tensor>
struct StoreArguments {
  int ratio = 4;
  Tensor state;
  Tensor positions;
  Tensor cache;  // written
  std::optional<Tensor> scale;
  bool pdl = false;

  static constexpr auto fields() {
    using A = StoreArguments;
    return std::tuple{implied("ratio", &A::ratio),
                      input("state", &A::state),
                      repeated_size("block_size", "state", 1),
                      input("positions", &A::positions, indexes("state", 2, "rows")),
                      output("cache", &A::cache),
                      repeated_stride("page_stride", "cache"),
                      input("scale", &A::scale, unit_scale_when("cache", DType::e4m3)),
                      dtype_flag("full_rows", "cache", {DType::bf16, DType::e4m3}),
                      launch_option("pdl", &A::pdl)};
  }
};
using StoreArgs = StoreArguments<TensorRef>;
using StoreDescriptors = StoreArguments<TensorDesc>;

static_assert(DeclaredArguments<StoreArgs>);
static_assert(argument_count<StoreArgs> == 9, "checked parameters are entries of the declaration");
static_assert(!is_argument_field<CheckedParameter>);
static_assert(is_argument_field<decltype(std::get<0>(StoreArgs::fields()))>);
static_assert(argument_index<StoreArgs>("page_stride") == 5);
static_assert(references_resolve<StoreArgs>());

// Declarations that name a tensor they do not have.
template <class Tensor>
struct UnknownTensorArguments {
  Tensor x;
  static constexpr auto fields() {
    using A = UnknownTensorArguments;
    return std::tuple{input("x", &A::x), repeated_size("n", "y", 0)};
  }
};
template <class Tensor>
struct ScalarNamedAsTensorArguments {
  Tensor x;
  int n = 0;
  static constexpr auto fields() {
    using A = ScalarNamedAsTensorArguments;
    return std::tuple{input("x", &A::x, indexes("n", 1, "rows")), scalar("n", &A::n)};
  }
};
static_assert(!references_resolve<UnknownTensorArguments<TensorRef>>());
static_assert(!references_resolve<ScalarNamedAsTensorArguments<TensorRef>>());

StoreArgs sample_store() {
  static float state[2 * 4 * 8];
  static long long positions[3];
  static unsigned char cache[2 * 4 * 16];
  StoreArgs args;
  args.state = make_tensor_ref(state, TensorDesc::contiguous(DType::f32, {2, 4, 8}));
  args.positions = make_tensor_ref(positions, TensorDesc::contiguous(DType::i64, {3}));
  args.cache = make_tensor_ref(cache, TensorDesc::contiguous(DType::u8, {2, 4, 16}));
  return args;
}

TEST(ArgumentRules, CheckedParametersAreNoFieldsOfTheCallOrItsDescriptors) {
  const StoreArgs args = sample_store();
  const StoreDescriptors descriptors = descriptors_of(args);
  EXPECT_EQ(descriptors.state, args.state.desc);
  EXPECT_EQ(descriptors.cache, args.cache.desc);
  EXPECT_EQ(descriptors.ratio, 4);
  const std::string text = describe(args);
  EXPECT_EQ(text, describe(descriptors));
  EXPECT_NE(text.find("ratio=4"), std::string::npos) << text;  // an implied field is a field
  EXPECT_EQ(text.find("block_size"), std::string::npos) << text;
  EXPECT_EQ(text.find("full_rows"), std::string::npos) << text;
}

TEST(ArgumentRules, TheSchemaHasTheSignatureTheBindingsTake) {
  // The implied ratio is nobody's to pass; a restated size or stride may be None, as a flag.
  EXPECT_EQ(operator_schema<StoreArgs>(),
            "(Tensor state, int? block_size, Tensor positions, Tensor(a!) cache, "
            "int? page_stride, Tensor? scale, bool? full_rows, bool pdl=False) -> ()");
}

TEST(ArgumentRules, RestatedValuesMustAgreeWithTheirTensorNamingBoth) {
  const StoreArgs args = sample_store();
  const ArgumentChecks checks("test.store");
  constexpr auto fields = StoreArgs::fields();
  const auto& block_size = std::get<2>(fields);
  const auto& page_stride = std::get<5>(fields);
  const auto& full_rows = std::get<7>(fields);
  using Size = std::optional<std::int64_t>;
  using Flag = std::optional<bool>;
  EXPECT_NO_THROW(check_restated(block_size, Size{}, args.state.desc, checks));
  EXPECT_NO_THROW(check_restated(block_size, Size{4}, args.state.desc, checks));
  EXPECT_NO_THROW(check_restated(page_stride, Size{64}, args.cache.desc, checks));
  EXPECT_NO_THROW(check_restated(full_rows, Flag{false}, args.cache.desc, checks));
  EXPECT_NO_THROW(check_restated(full_rows, Flag{}, args.cache.desc, checks));
  const auto refused = [](auto check, const std::string& argument, const std::string& words) {
    try {
      check();
      ADD_FAILURE() << argument << ": accepted";
    } catch (const InvalidArgument& error) {
      EXPECT_EQ(error.kernel(), "test.store");
      EXPECT_EQ(error.argument(), argument);
      EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    }
  };
  refused([&] { check_restated(block_size, Size{8}, args.state.desc, checks); }, "block_size",
          "must equal state.shape[1] = 4, got 8");
  refused([&] { check_restated(page_stride, Size{16}, args.cache.desc, checks); }, "page_stride",
          "must equal cache.stride(0) = 64, got 16");
  refused([&] { check_restated(full_rows, Flag{true}, args.cache.desc, checks); }, "full_rows",
          "is True, but cache has dtype u8 (True means cache is bf16 or e4m3)");
  StoreArgs full = args;
  full.cache.desc.dtype = DType::bf16;
  refused([&] { check_restated(full_rows, Flag{false}, full.cache.desc, checks); }, "full_rows",
          "is False, but cache has dtype bf16");
}

TEST(ArgumentRules, IndexBoundsAndDefaultsAreReadableAsData) {
  constexpr auto fields = StoreArgs::fields();
  const auto& positions = std::get<3>(fields);
  EXPECT_EQ(positions.bound.tensor, "state");
  EXPECT_EQ(positions.bound.dims, 2);
  EXPECT_EQ(positions.bound.what, "rows");
  EXPECT_TRUE(positions.bound.read_where_tensor.empty());
  EXPECT_EQ(indexes("cos_sin", 1, "rows").read_where("slots").read_where_tensor, "slots");
  const auto& scale = std::get<6>(fields);
  EXPECT_EQ(scale.fallback.tensor, "cache");
  EXPECT_EQ(scale.fallback.dtype, DType::e4m3);
  EXPECT_TRUE(std::get<1>(fields).fallback.tensor.empty());
}

// --- Outputs allocated from part of a tensor's shape ---------------------------------------

constexpr OutputAllocation kPacked = allocated_like(DType::u8, "q", 3).with_extent_divided(2, 2);
constexpr OutputAllocation kScales = allocated_like(DType::u8, "q", 3).with_extent_divided(2, 32);
constexpr OutputAllocation kWeights = allocated_like(DType::f32, "q", 2).with_like_rank(3);
static_assert(kPacked.like_rank == 3 && kPacked.divisor(2) == 2 && kPacked.divisor(0) == 1);
static_assert(kWeights.leading_dims == 2 && kWeights.like_rank == 3);
static_assert(allocated_like(DType::f32, "x", 1, {2}).like_rank == 1);

std::vector<std::int64_t> shape_of(const OutputAllocation& allocation, const TensorDesc& like) {
  std::array<std::int64_t, kMaxTensorDims> shape{};
  const std::size_t rank =
      allocated_shape(allocation, like, "out", ArgumentChecks("test.indexer"), shape);
  return {shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(rank)};
}

TEST(ArgumentRules, AllocationsTakeSomeExtentsOrAFractionOfOne) {
  const TensorDesc q = TensorDesc::contiguous(DType::bf16, {5, 64, 128});
  EXPECT_EQ(shape_of(kPacked, q), (std::vector<std::int64_t>{5, 64, 64}));
  EXPECT_EQ(shape_of(kScales, q), (std::vector<std::int64_t>{5, 64, 4}));
  EXPECT_EQ(shape_of(kWeights, q), (std::vector<std::int64_t>{5, 64}));
  EXPECT_EQ(
      shape_of(allocated_like(DType::f32, "x", 1, {2}), TensorDesc::contiguous(DType::f32, {7})),
      (std::vector<std::int64_t>{7, 2}));
  const ArgumentChecks checks("test.indexer");
  EXPECT_NO_THROW(check_allocation_source(kWeights, q, checks));
  try {
    check_allocation_source(kWeights, TensorDesc::contiguous(DType::bf16, {5, 64}), checks);
    ADD_FAILURE() << "a 2-D q was taken for a rule of rank 3";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.argument(), "q");
    EXPECT_NE(std::string(error.what()).find("must have 3 dimensions"), std::string::npos);
  }
  try {
    (void)shape_of(kScales, TensorDesc::contiguous(DType::bf16, {5, 64, 100}));
    ADD_FAILURE() << "a head of 100 was split in blocks of 32";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.argument(), "q");
    EXPECT_NE(std::string(error.what()).find("must be a multiple of 32"), std::string::npos)
        << error.what();
  }
}

// --- Dtype sets, and rows that share an op -----------------------------------------------------

TEST(ArgumentRules, DtypeSetsAreConstantsThatPrint) {
  constexpr DTypeSet full = dtype_set({DType::bf16, DType::e4m3, DType::bf16});
  static_assert(full.count == 2 && full.contains(DType::e4m3) && !full.contains(DType::u8));
  EXPECT_EQ(to_string(full), "bf16 or e4m3");
  EXPECT_EQ(to_string(dtype_set({})), "");
}

struct NoKey {
  int variant = 0;
  static constexpr auto fields() { return std::tuple{field("variant", &NoKey::variant)}; }
  auto operator<=>(const NoKey&) const = default;
};
struct NoGate {
  static constexpr auto fields() { return std::tuple{}; }
};
struct NoConfig {};

template <int Variant>
class StoreKernel final : public JitKernel<StoreKernel<Variant>, NoKey, StoreDescriptors> {
 public:
  NoKey dispatch(const StoreDescriptors&) const override { return {Variant}; }
  Program program(const NoKey&) const override { return {}; }
  LaunchSpec<NoKey> plan(const NoKey& key, const StoreArgs&) const {
    LaunchSpec<NoKey> spec;
    spec.key = key;
    return spec;
  }
  WarmupSpace<StoreDescriptors> warmup_space(const NoGate&) const {
    return WarmupSpace<StoreDescriptors>(StoreDescriptors{});
  }

 private:
  friend JitKernel<StoreKernel<Variant>, NoKey, StoreDescriptors>;
  StoreKernel()
      : JitKernel<StoreKernel<Variant>, NoKey, StoreDescriptors>("test.store" +
                                                                 std::to_string(Variant)) {}
};

std::optional<NoGate> always(const NoConfig&) { return NoGate{}; }

constexpr KernelTable kStores{
    "test",
    KernelRow<StoreKernel<0>, NoGate, NoConfig>{&always, "store", when_dtype("cache", {DType::u8})},
    KernelRow<StoreKernel<1>, NoGate, NoConfig>{&always, "store",
                                                when_dtype("cache", {DType::bf16, DType::e4m3})},
    KernelRow<StoreKernel<2>, NoGate, NoConfig>{&always},
};

TEST(ArgumentRules, RowsNameTheirOpAndTheDtypesOfItsTensorTheyTake) {
  static_assert(decltype(kStores)::row_count == 3);
  static_assert(kStores.row<0>().python_op == "store" && kStores.row<1>().python_op == "store");
  static_assert(kStores.row<1>().variant.tensor == "cache");
  static_assert(kStores.row<1>().variant.dtypes.contains(DType::e4m3));
  static_assert(!kStores.row<0>().variant.dtypes.contains(DType::e4m3));
  static_assert(kStores.row<2>().python_op.empty() && kStores.row<2>().variant.tensor.empty());
  EXPECT_EQ(kStores.kernels().size(), 3u);
}

}  // namespace
}  // namespace zerojit

// The argument checks every family kernel owes its callers, derived from its declaration rather
// than written per kernel: for each kernel whose arguments are declared with roles, calls built
// from every point of its warmup space (the shapes a serving configuration produces) are
// accepted by launch_spec (the base's dispatch, then the owner's plan), and each tensor argument
// given a dtype no DSv4 kernel takes, or one dimension too many, is refused before anything
// launches, by an InvalidArgument naming the kernel and that argument. The per-kernel
// test_arguments.cpp files add what a declaration cannot say (strides, aliasing, cross-sizes).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "dsv4/family.hpp"
#include "zerojit/fallback.hpp"

namespace zerojit::dsv4 {
namespace {

// Configurations that, together, run every kernel of the table.
std::vector<Dsv4Config> configurations() {
  std::vector<Dsv4Config> out;
  for (const KvCacheDtype cache :
       {KvCacheDtype::fp8_ds_mla, KvCacheDtype::bf16, KvCacheDtype::fp8_e4m3}) {
    Dsv4Config config = default_config();
    config.serving.kv_cache_dtype = cache;
    config.serving.dcp_world_size = 2;
    out.push_back(config);
  }
  Dsv4Config mxfp4 = default_config();
  mxfp4.serving.indexer_dtype = IndexerDtype::mxfp4;
  mxfp4.serving.target_arch = "sm_100a";
  out.push_back(mxfp4);
  return out;
}

// The argument an InvalidArgument from planning `args` names, or "(accepted)".
template <class Kernel, class Args>
std::string refused_argument(const Kernel& kernel, const Args& args) {
  try {
    (void)kernel.launch_spec(args);
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.kernel(), kernel.name()) << error.what();
    return error.argument();
  }
  return "(accepted)";
}

// Every tensor argument of `args`, each broken in `break_tensor`'s way, must be refused naming
// that argument.
template <class Kernel, class Args, class Break>
void expect_each_tensor_refused(const Kernel& kernel, const Args& args, Break break_tensor,
                                const std::string& how) {
  for_each_argument_index<Args>([&](auto index) {
    const auto field = std::get<index.value>(Args::fields());
    using V = std::decay_t<decltype(args.*(field.member))>;
    if constexpr (std::is_same_v<V, TensorRef> || std::is_same_v<V, std::optional<TensorRef>>) {
      Args broken = args;
      auto& tensor = broken.*(field.member);
      if constexpr (std::is_same_v<V, std::optional<TensorRef>>) {
        if (!tensor) return;
        break_tensor(*tensor);
      } else {
        break_tensor(tensor);
      }
      const std::string argument = refused_argument(kernel, broken);
      // A bound checked through another argument names both ("k_cache.shape[1] (block size)").
      EXPECT_EQ(argument.substr(0, field.name.size()), field.name)
          << kernel.name() << ": argument '" << field.name << "' " << how << " was "
          << (argument == "(accepted)" ? "accepted" : "refused naming '" + argument + "'");
    }
  });
}

TEST(Dsv4DeclaredArguments, EveryTensorArgumentIsCheckedBeforeALaunch) {
  std::set<std::string> checked;
  for (const Dsv4Config& config : configurations()) {
    const AttentionKernels kernels(config);
    kFamily.for_each_row([&](const auto& row) {
      using Kernel = typename std::decay_t<decltype(row)>::KernelType;
      using Descriptors = typename Kernel::Descriptors;
      if constexpr (DeclaredArguments<Descriptors>) {
        const auto& gate = kernels.template gate<Kernel>();
        if (!gate) return;
        const Kernel& kernel = Kernel::instance();
        kernel.warmup_space(*gate).for_each_point([&](std::size_t, const std::vector<std::size_t>&,
                                                      const Descriptors* point) {
          if (point == nullptr) return;
          const auto args = zerojit::placeholder_call(*point);
          ASSERT_EQ(refused_argument(kernel, args), "(accepted)")
              << kernel.name() << " refused a call at its own warmup point " << describe(*point);
          expect_each_tensor_refused(
              kernel, args, [](TensorRef& t) { t.desc.dtype = DType::f64; }, "given dtype f64");
          expect_each_tensor_refused(
              kernel, args,
              [](TensorRef& t) {
                std::vector<std::int64_t> shape(t.desc.shape.begin(),
                                                t.desc.shape.begin() + t.desc.ndim);
                shape.push_back(1);
                t.desc = TensorDesc::contiguous(t.desc.dtype, shape, t.desc.device);
              },
              "given one dimension more");
          checked.insert(std::string(kernel.name()));
        });
      }
    });
  }
  // The kernels with declared arguments, each reached by some configuration.
  EXPECT_GE(checked.size(), 6u) << ::testing::PrintToString(checked);
}

}  // namespace
}  // namespace zerojit::dsv4

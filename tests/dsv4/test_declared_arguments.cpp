// The argument checks every family kernel owes its callers, derived from its declaration rather
// than written per kernel: for each kernel whose arguments are declared with roles, calls built
// from every point of its warmup space (the shapes a serving configuration produces) are
// accepted by launch_spec (the base's dispatch, then the owner's plan), and each tensor argument
// given a dtype no DSv4 kernel takes, or one dimension too many, is refused before anything
// launches, by an InvalidArgument naming the kernel and that argument. The per-kernel
// test_arguments.cpp files add what a declaration cannot say (strides, aliasing, cross-sizes).
// And the Python ops derived from the declarations take vLLM's signatures.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
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

// The field's tensor (when it is one) broken in `break_tensor`'s way must be refused naming it.
template <class Kernel, class Args, class Field, class Break>
void expect_tensor_refused(const Kernel& kernel, const Args& args, const Field& field,
                           Break break_tensor, const std::string& how) {
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
}

// Every tensor argument of `args`, each broken in `break_tensor`'s way, must be refused naming
// that argument.
template <class Kernel, class Args, class Break>
void expect_each_tensor_refused(const Kernel& kernel, const Args& args, Break break_tensor,
                                const std::string& how) {
  for_each_argument_index<Args>([&](auto index) {
    const auto entry = std::get<index.value>(Args::fields());
    if constexpr (is_argument_field<decltype(entry)>) {  // not a checked parameter
      expect_tensor_refused(kernel, args, entry, break_tensor, how);
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

// The Python ops take vLLM's signatures, derived from the declarations: the order and names of
// vLLM's functions, the sizes and layout flags they restate as optional values, the ratio a C4
// store's route implies left out. (The scales' product and pdl are zerojit's.)
TEST(Dsv4DeclaredArguments, TheOpsTakeVllmsSignatures) {
  EXPECT_EQ(operator_schema<IndexerQMxFp4Args>(),
            "(Tensor positions, Tensor q, Tensor cos_sin_cache, Tensor weights, float scale, "
            "Tensor(a!) q_packed, Tensor(b!) q_scale, Tensor(c!) weights_out, bool pdl=False) "
            "-> ()");
  EXPECT_EQ(operator_schema<DequantGatherArgs>(),
            "(Tensor(a!) out, Tensor k_cache, Tensor seq_lens, Tensor? gather_lens, "
            "Tensor block_table, int? block_size, int offset, bool pdl=False) -> ()");
  EXPECT_EQ(operator_schema<C4StoreArgs>(),
            "(Tensor state_cache, Tensor token_to_req_indices, Tensor positions, "
            "Tensor slot_mapping, Tensor block_table, int? block_size, Tensor rms_norm_weight, "
            "float rms_norm_eps, Tensor cos_sin_cache, Tensor(a!) k_cache, "
            "Tensor kv_slot_mapping, int? kv_cache_block_size, int? kv_block_stride, "
            "Tensor? fp8_scale, bool? store_full_kv, bool? store_full_fp8, bool pdl=False) -> ()");
  EXPECT_EQ(operator_schema<C128CompressArgs>(),
            "(Tensor state_cache, Tensor token_to_req_indices, Tensor positions, "
            "Tensor slot_mapping, Tensor block_table, int? block_size, Tensor(a!) compressed_kv, "
            "bool pdl=False) -> ()");
  EXPECT_EQ(operator_schema<C128StoreArgs>(),
            "(Tensor compressed_kv, Tensor positions, Tensor slot_mapping, "
            "Tensor rms_norm_weight, float rms_norm_eps, Tensor cos_sin_cache, "
            "Tensor(a!) k_cache, Tensor kv_slot_mapping, int? kv_cache_block_size, "
            "int? kv_block_stride, Tensor? fp8_scale, bool? store_full_kv, "
            "bool? store_full_fp8, bool pdl=False) -> ()");
}

// A store op's rows take every cache dtype a store writes, each once: u8 fp8_ds_mla pages, bf16
// and e4m3 full rows; and every row with an op names one (the indexer, the gather, the C128
// compress, the DCP pack are ops of their own).
TEST(Dsv4DeclaredArguments, EveryRowHasAnOpAndTheStoresSplitTheCacheDtypes) {
  std::map<std::string, std::vector<std::string>> ops;  // op -> "kernel:dtypes"
  kFamily.for_each_row([&](const auto& row) {
    using Kernel = typename std::decay_t<decltype(row)>::KernelType;
    ASSERT_FALSE(row.python_op.empty()) << Kernel::instance().name();
    ops[std::string(row.python_op)].push_back(Kernel::instance().name() + ":" +
                                              to_string(row.variant.dtypes));
  });
  using Rows = std::vector<std::string>;
  EXPECT_EQ(ops["c4_store"], (Rows{"dsv4.c4_store:u8", "dsv4.c4_store_full:bf16 or e4m3"}));
  EXPECT_EQ(ops["c128_store"], (Rows{"dsv4.c128_store:u8", "dsv4.c128_store_full:bf16 or e4m3"}));
  EXPECT_EQ(ops["dcp_pack"], (Rows{"dsv4.dcp_pack:"}));
  EXPECT_EQ(ops.size(), 7u);
}

}  // namespace
}  // namespace zerojit::dsv4

// The DSv4 kernel gates: which kernels a configuration runs, with which compile-relevant
// parameters. Every expectation is written out by hand from the spec (§2-§8, §11, §12).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "unit/dsv4_config_support.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::config_testing;
using nlohmann::json;

TEST(Dsv4Gates, DefaultConfigGivesTheSection11Manifest) {
  const Dsv4Config config = default_config();

  const auto indexer = indexer_q_gate(config);
  ASSERT_TRUE(indexer.has_value());
  EXPECT_EQ(*indexer, (IndexerQGate{IndexerDtype::fp8, 128, 64, 64, FloatDtype::f32, 8192}));

  const std::vector<DequantGatherCall> expected_gather = {{256, true}, {64, false}, {2, false}};
  EXPECT_EQ(dequant_gather_calls(config), expected_gather);

  const auto c4 = c4_ds_mla_store_gate(config);
  ASSERT_TRUE(c4.has_value());
  EXPECT_EQ(*c4, (C4DsMlaStoreGate{512, 1024, 64, FloatDtype::bf16, 64}));

  const auto c128_compress = c128_compress_gate(config);
  ASSERT_TRUE(c128_compress.has_value());
  EXPECT_EQ(*c128_compress, (C128CompressGate{512, 512, 8192}));

  const auto c128_store = c128_ds_mla_store_gate(config);
  ASSERT_TRUE(c128_store.has_value());
  EXPECT_EQ(*c128_store, (C128DsMlaStoreGate{512, 64, 2, 1728, FloatDtype::bf16}));

  EXPECT_FALSE(c4_full_store_gate(config).has_value());
  EXPECT_FALSE(c128_full_store_gate(config).has_value());
  EXPECT_FALSE(dcp_pack_gate(config).has_value());
}

TEST(Dsv4Gates, MxFp4IndexerOnBlackwell) {
  ServingConfig serving;
  serving.indexer_dtype = IndexerDtype::mxfp4;
  serving.target_arch = "sm_100a";
  const Dsv4Config config = config_with(dsv4_flash(), serving);
  const auto indexer = indexer_q_gate(config);
  ASSERT_TRUE(indexer.has_value());
  EXPECT_EQ(indexer->variant, IndexerDtype::mxfp4);
  EXPECT_EQ(indexer->cos_sin_dtype, FloatDtype::f32);
  // Only the indexer variant changes.
  EXPECT_EQ(c4_ds_mla_store_gate(config), c4_ds_mla_store_gate(default_config()));
  EXPECT_EQ(dequant_gather_calls(config), dequant_gather_calls(default_config()));
}

TEST(Dsv4Gates, Bf16CacheUsesTheFullStores) {
  ServingConfig serving;
  serving.kv_cache_dtype = KvCacheDtype::bf16;
  const Dsv4Config config = config_with(dsv4_flash(), serving);
  EXPECT_FALSE(c4_ds_mla_store_gate(config).has_value());
  EXPECT_FALSE(c128_ds_mla_store_gate(config).has_value());
  const auto c4_full = c4_full_store_gate(config);
  ASSERT_TRUE(c4_full.has_value());
  EXPECT_EQ(*c4_full, (C4FullStoreGate{512, 1024, 64, false, FloatDtype::bf16, 64}));
  const auto c128_full = c128_full_store_gate(config);
  ASSERT_TRUE(c128_full.has_value());
  EXPECT_EQ(*c128_full, (C128FullStoreGate{512, 64, false, FloatDtype::bf16, 2}));
  // The compress stage feeds either store.
  EXPECT_EQ(c128_compress_gate(config), (C128CompressGate{512, 512, 8192}));
  EXPECT_TRUE(indexer_q_gate(config).has_value());
}

TEST(Dsv4Gates, Fp8E4m3CacheStoresFullFp8) {
  ServingConfig serving;
  set_serving_option(serving, "kv_cache_dtype", "fp8");
  const Dsv4Config config = config_with(dsv4_flash(), serving);
  EXPECT_FALSE(c4_ds_mla_store_gate(config).has_value());
  EXPECT_FALSE(c128_ds_mla_store_gate(config).has_value());
  ASSERT_TRUE(c4_full_store_gate(config).has_value());
  EXPECT_TRUE(c4_full_store_gate(config)->store_full_fp8);
  ASSERT_TRUE(c128_full_store_gate(config).has_value());
  EXPECT_TRUE(c128_full_store_gate(config)->store_full_fp8);
}

TEST(Dsv4Gates, BlockSize64) {
  ServingConfig serving;
  serving.block_size = 64;
  const Dsv4Config config = config_with(dsv4_flash(), serving);
  const std::vector<DequantGatherCall> expected_gather = {{64, true}, {16, false}, {1, false}};
  EXPECT_EQ(dequant_gather_calls(config), expected_gather);
  const auto c128_store = c128_ds_mla_store_gate(config);
  ASSERT_TRUE(c128_store.has_value());
  EXPECT_EQ(c128_store->kv_cache_block_size, 1);
  EXPECT_EQ(c128_store->page_stride_bytes, 1152);
}

TEST(Dsv4Gates, DequantGatherDeduplicatesEqualCalls) {
  ServingConfig serving;
  serving.block_size = 1;  // every cache has one row per page
  const Dsv4Config config = config_with(dsv4_flash(), serving);
  const std::vector<DequantGatherCall> expected = {{1, true}, {1, false}};
  EXPECT_EQ(dequant_gather_calls(config), expected);
}

TEST(Dsv4Gates, PageStrideOverride) {
  ServingConfig serving;
  serving.c128_page_stride_bytes = 39168;
  const Dsv4Config config = config_with(dsv4_flash(), serving);
  const auto c128_store = c128_ds_mla_store_gate(config);
  ASSERT_TRUE(c128_store.has_value());
  EXPECT_EQ(c128_store->kv_cache_block_size, 2);
  EXPECT_EQ(c128_store->page_stride_bytes, 39168);
}

TEST(Dsv4Gates, RatiosFourAndOneTwentyEight) {
  const Dsv4Config config = config_with(model_with_ratios({4, 128}));
  EXPECT_TRUE(indexer_q_gate(config).has_value());
  const std::vector<DequantGatherCall> expected_gather = {{256, true}, {64, false}, {2, false}};
  EXPECT_EQ(dequant_gather_calls(config), expected_gather);
  EXPECT_TRUE(c4_ds_mla_store_gate(config).has_value());
  EXPECT_TRUE(c128_compress_gate(config).has_value());
  EXPECT_TRUE(c128_ds_mla_store_gate(config).has_value());
  EXPECT_FALSE(c4_full_store_gate(config).has_value());
  EXPECT_FALSE(c128_full_store_gate(config).has_value());
  EXPECT_FALSE(dcp_pack_gate(config).has_value());
}

TEST(Dsv4Gates, RatioFourOnly) {
  const Dsv4Config config = config_with(model_with_ratios({0, 4, 4}));
  EXPECT_TRUE(indexer_q_gate(config).has_value());
  const std::vector<DequantGatherCall> expected_gather = {{256, true}, {64, false}};
  EXPECT_EQ(dequant_gather_calls(config), expected_gather);
  EXPECT_TRUE(c4_ds_mla_store_gate(config).has_value());
  EXPECT_FALSE(c128_compress_gate(config).has_value());
  EXPECT_FALSE(c128_ds_mla_store_gate(config).has_value());
  EXPECT_FALSE(c128_full_store_gate(config).has_value());
}

TEST(Dsv4Gates, RatioOneTwentyEightOnly) {
  ServingConfig serving;
  serving.dcp_world_size = 2;
  const Dsv4Config config = config_with(model_with_ratios({128, 0}), serving);
  EXPECT_FALSE(indexer_q_gate(config).has_value());  // no CSA layer, no indexer
  EXPECT_FALSE(dcp_pack_gate(config).has_value());   // DCP packs indexer candidates only
  const std::vector<DequantGatherCall> expected_gather = {{256, true}, {2, false}};
  EXPECT_EQ(dequant_gather_calls(config), expected_gather);
  EXPECT_FALSE(c4_ds_mla_store_gate(config).has_value());
  EXPECT_TRUE(c128_compress_gate(config).has_value());
  EXPECT_TRUE(c128_ds_mla_store_gate(config).has_value());
}

TEST(Dsv4Gates, NoCompressedLayers) {
  ServingConfig serving;
  serving.dcp_world_size = 2;
  const Dsv4Config config = config_with(model_with_ratios({0, 0, 0}), serving);
  const std::vector<DequantGatherCall> expected_gather = {{256, true}};
  EXPECT_EQ(dequant_gather_calls(config), expected_gather);
  const NoKernels none = absent(config);
  EXPECT_TRUE(none.indexer_q);
  EXPECT_TRUE(none.c4_ds_mla);
  EXPECT_TRUE(none.c4_full);
  EXPECT_TRUE(none.c128_compress);
  EXPECT_TRUE(none.c128_ds_mla);
  EXPECT_TRUE(none.c128_full);
  EXPECT_TRUE(none.dcp);
}

TEST(Dsv4Gates, MtpLayerRatioCounts) {
  ModelConfig model = model_with_ratios({0, 0});
  model.num_nextn_predict_layers = 1;
  model.mtp_compress_ratios = {4};
  const Dsv4Config config = config_with(model);
  EXPECT_TRUE(indexer_q_gate(config).has_value());
  EXPECT_TRUE(c4_ds_mla_store_gate(config).has_value());
}

TEST(Dsv4Gates, BlockSizeZeroRunsNothing) {
  for (const KvCacheDtype dtype :
       {KvCacheDtype::fp8_ds_mla, KvCacheDtype::bf16, KvCacheDtype::fp8_e4m3}) {
    ServingConfig serving;
    serving.block_size = 0;
    serving.kv_cache_dtype = dtype;
    serving.dcp_world_size = 2;
    const NoKernels none = absent(config_with(dsv4_flash(), serving));
    EXPECT_TRUE(none.indexer_q && none.dequant_gather && none.c4_ds_mla && none.c4_full &&
                none.c128_compress && none.c128_ds_mla && none.c128_full && none.dcp)
        << to_string(dtype);
  }
}

TEST(Dsv4Gates, OtherHeadSizeHasNoCompressorKernels) {
  ModelConfig model = dsv4_flash();
  model.head_dim = 256;
  const Dsv4Config config = config_with(model);
  EXPECT_FALSE(c4_ds_mla_store_gate(config).has_value());
  EXPECT_FALSE(c128_compress_gate(config).has_value());
  EXPECT_FALSE(c128_ds_mla_store_gate(config).has_value());
  // The indexer and the gather do not depend on the main head size.
  EXPECT_TRUE(indexer_q_gate(config).has_value());
  EXPECT_EQ(dequant_gather_calls(config).size(), 3u);
}

TEST(Dsv4Gates, IndexerNeedsAllItsDims) {
  for (int which = 0; which < 3; ++which) {
    ModelConfig model = dsv4_flash();
    if (which == 0) model.index_n_heads = 0;
    if (which == 1) model.index_head_dim = 0;
    if (which == 2) {
      // The compressors need a 64-dim tail (Dsv4ConfigKernelDomains): a head size they do not
      // run for leaves the indexer alone to depend on it.
      model.qk_rope_head_dim = 0;
      model.head_dim = 256;
    }
    ServingConfig serving;
    serving.dcp_world_size = 2;
    const Dsv4Config config = config_with(model, serving);
    EXPECT_FALSE(indexer_q_gate(config).has_value()) << which;
    EXPECT_FALSE(dcp_pack_gate(config).has_value()) << which;
  }
}

TEST(Dsv4Gates, IndexerCarriesTheTokenBound) {
  ServingConfig serving;
  serving.max_num_batched_tokens = 256;
  const auto indexer = indexer_q_gate(config_with(dsv4_flash(), serving));
  ASSERT_TRUE(indexer.has_value());
  EXPECT_EQ(indexer->max_num_tokens, 256);
}

TEST(Dsv4Gates, DcpPack) {
  ServingConfig serving;
  serving.dcp_world_size = 2;
  const auto flash = dcp_pack_gate(config_with(dsv4_flash(), serving));
  ASSERT_TRUE(flash.has_value());
  EXPECT_EQ(*flash, (DcpPackGate{512, 2, 1}));

  EXPECT_FALSE(dcp_pack_gate(default_config()).has_value());  // DCP 1

  serving.dcp_world_size = 4;
  serving.cp_interleave = 64;
  const auto pro = dcp_pack_gate(config_with(dsv4_pro(), serving));
  ASSERT_TRUE(pro.has_value());
  EXPECT_EQ(*pro, (DcpPackGate{1024, 4, 64}));

  ModelConfig no_topk = dsv4_flash();
  no_topk.index_topk = 0;
  EXPECT_FALSE(dcp_pack_gate(config_with(no_topk, serving)).has_value());
}

}  // namespace
}  // namespace zerojit::dsv4

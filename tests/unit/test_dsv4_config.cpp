// The DSv4 model / serving configuration and the kernel gates. Every expectation is written
// out by hand from the spec (§0.4, §2-§8, §11, §12) and the published model configs.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dsv4/config.hpp"
#include "dsv4/family.hpp"

namespace zerojit::dsv4 {
namespace {

using nlohmann::json;

std::filesystem::path data_dir() {
#ifdef ZEROJIT_DSV4_TEST_DATA_DIR
  return std::filesystem::path(ZEROJIT_DSV4_TEST_DATA_DIR);
#else
  // tests/unit/<this file> -> tests/data/dsv4
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "data" / "dsv4";
#endif
}

std::filesystem::path fixture(const char* name) { return data_dir() / name; }

// Runs `action`, expects a ConfigError, and checks that its message holds every fragment.
void expect_config_error(const std::function<void()>& action,
                         std::initializer_list<std::string> fragments) {
  try {
    action();
  } catch (const ConfigError& error) {
    const std::string message = error.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message lacks '" << fragment << "': " << message;
    }
    return;
  }
  ADD_FAILURE() << "expected a ConfigError";
}

// A small head-512 model with the given decoder ratios and no MTP layer.
ModelConfig model_with_ratios(std::vector<int> ratios) {
  ModelConfig model = dsv4_flash();
  model.name = "test-model";
  model.num_hidden_layers = static_cast<int>(ratios.size());
  model.compress_ratios = std::move(ratios);
  model.num_nextn_predict_layers = 0;
  model.mtp_compress_ratios.clear();
  return model;
}

Dsv4Config config_with(ModelConfig model, ServingConfig serving = {}) {
  Dsv4Config config{std::move(model), std::move(serving)};
  validate(config);
  return config;
}

struct NoKernels {
  bool indexer_q, dequant_gather, c4_ds_mla, c4_full, c128_compress, c128_ds_mla, c128_full, dcp;
};

NoKernels absent(const Dsv4Config& config) {
  return {!indexer_q_gate(config),       dequant_gather_calls(config).empty(),
          !c4_ds_mla_store_gate(config), !c4_full_store_gate(config),
          !c128_compress_gate(config),   !c128_ds_mla_store_gate(config),
          !c128_full_store_gate(config), !dcp_pack_gate(config)};
}

// --- Presets ---------------------------------------------------------------------------------

TEST(Dsv4ConfigPresets, FlashMatchesThePublishedConfig) {
  const ModelConfig model = dsv4_flash();
  EXPECT_EQ(model.name, "dsv4-flash");
  EXPECT_EQ(model.num_hidden_layers, 43);
  EXPECT_EQ(model.num_nextn_predict_layers, 1);
  EXPECT_EQ(model.head_dim, 512);
  EXPECT_EQ(model.qk_rope_head_dim, 64);
  EXPECT_EQ(model.index_n_heads, 64);
  EXPECT_EQ(model.index_head_dim, 128);
  EXPECT_EQ(model.index_topk, 512);
  EXPECT_EQ(model.sliding_window, 128);
  EXPECT_EQ(model.rms_norm_eps, 1e-6);
  EXPECT_EQ(model.compress_rope_theta, 160000.0);
  EXPECT_EQ(model.max_position_embeddings, 1048576);
  EXPECT_EQ(model.dtype, FloatDtype::bf16);
  const std::vector<int> expected = {0, 0,   4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,
                                     4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,
                                     4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4};
  ASSERT_EQ(expected.size(), 43u);
  EXPECT_EQ(model.compress_ratios, expected);
  EXPECT_EQ(model.mtp_compress_ratios, std::vector<int>{0});
  EXPECT_NO_THROW(validate(model));
}

TEST(Dsv4ConfigPresets, ProMatchesThePublishedConfig) {
  const ModelConfig model = dsv4_pro();
  EXPECT_EQ(model.name, "dsv4-pro");
  EXPECT_EQ(model.num_hidden_layers, 61);
  EXPECT_EQ(model.num_nextn_predict_layers, 1);
  EXPECT_EQ(model.head_dim, 512);
  EXPECT_EQ(model.qk_rope_head_dim, 64);
  EXPECT_EQ(model.index_n_heads, 64);
  EXPECT_EQ(model.index_head_dim, 128);
  EXPECT_EQ(model.index_topk, 1024);
  EXPECT_EQ(model.sliding_window, 128);
  EXPECT_EQ(model.max_position_embeddings, 1048576);
  const std::vector<int> expected = {
      128, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,
      4,   128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,
      4,   128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4};
  ASSERT_EQ(expected.size(), 61u);
  EXPECT_EQ(model.compress_ratios, expected);
  EXPECT_EQ(model.mtp_compress_ratios, std::vector<int>{0});
  EXPECT_NO_THROW(validate(model));
}

TEST(Dsv4ConfigPresets, DefaultConfigIsFlashWithServingDefaults) {
  const Dsv4Config config = default_config();
  EXPECT_EQ(config.model, dsv4_flash());
  EXPECT_EQ(config.serving.block_size, 256);
  EXPECT_EQ(config.serving.kv_cache_dtype, KvCacheDtype::fp8_ds_mla);
  EXPECT_EQ(config.serving.indexer_dtype, IndexerDtype::fp8);
  EXPECT_EQ(config.serving.max_num_batched_tokens, 8192);
  EXPECT_EQ(config.serving.target_arch, "sm_90a");
  EXPECT_EQ(config.serving.dcp_world_size, 1);
  EXPECT_EQ(config.serving.cp_interleave, 1);
  EXPECT_FALSE(config.serving.c128_page_stride_bytes.has_value());
  EXPECT_NO_THROW(validate(config));
}

TEST(Dsv4ConfigPresets, ModelFromNameOrPath) {
  EXPECT_EQ(model_from_name_or_path("dsv4-flash"), dsv4_flash());
  EXPECT_EQ(model_from_name_or_path("dsv4-pro"), dsv4_pro());
  const std::string file = fixture("nested_text_config.json").string();
  EXPECT_EQ(model_from_name_or_path(file).num_hidden_layers, 4);
  expect_config_error([] { model_from_name_or_path("dsv4-huge"); },
                      {"dsv4-huge", "dsv4-flash", "dsv4-pro"});
}

TEST(Dsv4ConfigPresets, ModelFromDirectoryReadsItsConfigJson) {
  const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
  const std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("zerojit_dsv4_config_dir_" + std::to_string(stamp));
  std::filesystem::create_directories(directory);
  std::filesystem::copy_file(fixture("flash_config.json"), directory / "config.json");
  const ModelConfig model = model_from_name_or_path(directory.string());
  std::filesystem::remove_all(directory);
  EXPECT_EQ(model.compress_ratios, dsv4_flash().compress_ratios);
  EXPECT_EQ(model.name, (directory / "config.json").string());
}

// --- Helpers ---------------------------------------------------------------------------------

TEST(Dsv4ConfigHelpers, CompressedBlockSize) {
  EXPECT_EQ(compressed_block_size(256, 4), 64);
  EXPECT_EQ(compressed_block_size(256, 128), 2);
  EXPECT_EQ(compressed_block_size(64, 4), 16);
  EXPECT_EQ(compressed_block_size(64, 128), 1);
  EXPECT_EQ(compressed_block_size(0, 4), 1);
  EXPECT_EQ(compressed_block_size(100, 128), 1);
  EXPECT_THROW(compressed_block_size(256, 0), std::invalid_argument);
  EXPECT_THROW(compressed_block_size(-1, 4), std::invalid_argument);
}

TEST(Dsv4ConfigHelpers, DefaultPageStrideRoundsUpTo576) {
  EXPECT_EQ(default_ds_mla_page_stride_bytes(1), 1152);      // 584 -> 2 * 576
  EXPECT_EQ(default_ds_mla_page_stride_bytes(2), 1728);      // 1168 -> 3 * 576
  EXPECT_EQ(default_ds_mla_page_stride_bytes(64), 37440);    // 37376 -> 65 * 576
  EXPECT_EQ(default_ds_mla_page_stride_bytes(256), 149760);  // 149504 -> 260 * 576
  EXPECT_THROW(default_ds_mla_page_stride_bytes(0), std::invalid_argument);
}

TEST(Dsv4ConfigHelpers, HasCompressRatioCountsMtpLayers) {
  EXPECT_TRUE(has_compress_ratio(dsv4_flash(), 0));
  EXPECT_TRUE(has_compress_ratio(dsv4_flash(), 4));
  EXPECT_TRUE(has_compress_ratio(dsv4_flash(), 128));
  EXPECT_FALSE(has_compress_ratio(dsv4_flash(), 64));
  ModelConfig model = model_with_ratios({0, 0});
  EXPECT_FALSE(has_compress_ratio(model, 4));
  model.num_nextn_predict_layers = 1;
  model.mtp_compress_ratios = {4};
  EXPECT_TRUE(has_compress_ratio(model, 4));
}

TEST(Dsv4ConfigHelpers, TargetSmVersion) {
  EXPECT_EQ(target_sm_version("sm_90a"), 90);
  EXPECT_EQ(target_sm_version("sm_90"), 90);
  EXPECT_EQ(target_sm_version("sm_100a"), 100);
  EXPECT_EQ(target_sm_version("sm_100f"), 100);
  EXPECT_EQ(target_sm_version("sm_120a"), 120);
  for (const char* bad : {"sm90a", "sm_9", "sm_90b", "sm_", "compute_90a", "sm_1000", ""}) {
    expect_config_error([bad] { target_sm_version(bad); }, {"target_arch", std::string("'") + bad});
  }
}

// --- Gates -----------------------------------------------------------------------------------

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
  EXPECT_EQ(*c128_compress, (C128CompressGate{512, 512}));

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
  EXPECT_EQ(c128_compress_gate(config), (C128CompressGate{512, 512}));
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
    if (which == 2) model.qk_rope_head_dim = 0;
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

// --- Loading config.json ---------------------------------------------------------------------

TEST(Dsv4ConfigLoad, FlashLikeFile) {
  const std::filesystem::path path = fixture("flash_config.json");
  const ModelConfig model = load_model_config(path);
  EXPECT_EQ(model.name, path.string());
  ModelConfig expected = dsv4_flash();
  expected.name = path.string();
  EXPECT_EQ(model, expected);
}

TEST(Dsv4ConfigLoad, NestedTextConfig) {
  const ModelConfig model = load_model_config(fixture("nested_text_config.json"));
  EXPECT_EQ(model.num_hidden_layers, 4);
  EXPECT_EQ(model.compress_ratios, (std::vector<int>{128, 0, 4, 128}));
  // The file lists the decoder layers only: the MTP layer gets ratio 0.
  EXPECT_EQ(model.num_nextn_predict_layers, 1);
  EXPECT_EQ(model.mtp_compress_ratios, std::vector<int>{0});
  EXPECT_EQ(model.index_topk, 1024);
  EXPECT_EQ(model.max_position_embeddings, 65536);
  EXPECT_EQ(model.dtype, FloatDtype::bf16);
}

TEST(Dsv4ConfigLoad, TransformersLayerTypesForm) {
  const ModelConfig model = load_model_config(fixture("layer_types_config.json"));
  EXPECT_EQ(model.compress_ratios, (std::vector<int>{0, 0, 4, 128}));
  EXPECT_EQ(model.mtp_compress_ratios, std::vector<int>{0});
  EXPECT_EQ(model.index_n_heads, 2);
  EXPECT_EQ(model.dtype, FloatDtype::f32);
  // Absent fields take the DeepseekV4Config defaults.
  EXPECT_EQ(model.sliding_window, 128);
  EXPECT_EQ(model.rms_norm_eps, 1e-6);
  EXPECT_EQ(model.compress_rope_theta, 160000.0);
  EXPECT_EQ(model.max_position_embeddings, 1048576);
  // A float32 model stores FP32 norm weights; the cos/sin cache stays FP32 either way.
  const Dsv4Config config = config_with(model);
  EXPECT_EQ(c4_ds_mla_store_gate(config)->norm_weight_dtype, FloatDtype::f32);
  EXPECT_EQ(indexer_q_gate(config)->cos_sin_dtype, FloatDtype::f32);
}

TEST(Dsv4ConfigLoad, MalformedFilesNameTheFileAndTheField) {
  struct Case {
    const char* file;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {"malformed_bad_json.json", {"invalid JSON", "parse error"}},
      {"malformed_wrong_type.json", {"'head_dim'", "must be an integer", "string \"512\""}},
      {"malformed_bad_ratio.json", {"'compress_ratios[3]'", "64", "0, 4 or 128"}},
      {"malformed_ratio_count.json",
       {"'compress_ratios'", "has 3 entries", "num_hidden_layers = 4",
        "num_hidden_layers + num_nextn_predict_layers = 5"}},
      {"malformed_negative_dim.json", {"'index_head_dim'", ">= 0", "-128"}},
      {"malformed_ratio_list_type.json", {"'compress_ratios'", "must be an array"}},
  };
  for (const Case& test_case : cases) {
    SCOPED_TRACE(test_case.file);
    const std::filesystem::path path = fixture(test_case.file);
    try {
      load_model_config(path);
      ADD_FAILURE() << "expected a ConfigError";
    } catch (const ConfigError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(path.string()), std::string::npos) << message;
      for (const std::string& fragment : test_case.fragments) {
        EXPECT_NE(message.find(fragment), std::string::npos)
            << "message lacks '" << fragment << "': " << message;
      }
    }
  }
}

TEST(Dsv4ConfigLoad, MissingFile) {
  const std::filesystem::path path = fixture("no_such_config.json");
  expect_config_error([&path] { load_model_config(path); }, {path.string(), "cannot open"});
}

TEST(Dsv4ConfigLoad, DocumentErrors) {
  const json base = json::parse(R"({"num_hidden_layers": 2, "compress_ratios": [4, 128]})");
  EXPECT_EQ(model_config_from_json(base, "doc").compress_ratios, (std::vector<int>{4, 128}));

  expect_config_error([] { model_config_from_json(json::array(), "doc"); },
                      {"'doc'", "expected a JSON object"});
  expect_config_error(
      [] { model_config_from_json(json::parse(R"({"compress_ratios": []})"), "doc"); },
      {"missing field 'num_hidden_layers'"});
  expect_config_error(
      [] { model_config_from_json(json::parse(R"({"num_hidden_layers": 2})"), "doc"); },
      {"missing field 'compress_ratios'"});
  expect_config_error(
      [&base] {
        json document = base;
        document["text_config"] = 5;
        model_config_from_json(document, "doc");
      },
      {"'text_config'", "must be an object"});
  expect_config_error(
      [&base] {
        json document = base;
        document["compress_ratios"] = json::parse("[4, 4.5]");
        model_config_from_json(document, "doc");
      },
      {"'compress_ratios[1]'", "must be an integer"});
  expect_config_error(
      [&base] {
        json document = base;
        document["torch_dtype"] = "float16";
        model_config_from_json(document, "doc");
      },
      {"'torch_dtype'", "float16", "bfloat16, float32"});
  expect_config_error(
      [&base] {
        json document = base;
        document["rms_norm_eps"] = "tiny";
        model_config_from_json(document, "doc");
      },
      {"'rms_norm_eps'", "must be a number"});
  expect_config_error(
      [&base] {
        json document = base;
        document["num_hidden_layers"] = 0;
        model_config_from_json(document, "doc");
      },
      {"'num_hidden_layers'", ">= 1"});
  expect_config_error(
      [&base] {
        json document = base;
        document["head_dim"] = 4294967296LL;
        model_config_from_json(document, "doc");
      },
      {"'head_dim'", "out of range"});
  expect_config_error(
      [&base] {
        json document = base;
        document.erase("compress_ratios");
        document["layer_types"] = {"sliding_attention", "mystery_attention"};
        document["compress_rates"] = {{"compressed_sparse_attention", 4}};
        model_config_from_json(document, "doc");
      },
      {"'layer_types[1]'", "mystery_attention"});
}

// --- Serving options -------------------------------------------------------------------------

TEST(Dsv4ServingOptions, ParseEveryOption) {
  ServingConfig serving;
  set_serving_option(serving, "block-size", "64");
  set_serving_option(serving, "kv_cache_dtype", "auto");
  set_serving_option(serving, "indexer_dtype", "mxfp4");
  set_serving_option(serving, "max_num_batched_tokens", "16384");
  set_serving_option(serving, "target_arch", "sm_100a");
  set_serving_option(serving, "dcp-world-size", "4");
  set_serving_option(serving, "cp_interleave", "2");
  set_serving_option(serving, "c128_page_stride_bytes", "39168");
  EXPECT_EQ(serving.block_size, 64);
  EXPECT_EQ(serving.kv_cache_dtype, KvCacheDtype::bf16);
  EXPECT_EQ(serving.indexer_dtype, IndexerDtype::mxfp4);
  EXPECT_EQ(serving.max_num_batched_tokens, 16384);
  EXPECT_EQ(serving.target_arch, "sm_100a");
  EXPECT_EQ(serving.dcp_world_size, 4);
  EXPECT_EQ(serving.cp_interleave, 2);
  EXPECT_EQ(serving.c128_page_stride_bytes, 39168);
  EXPECT_NO_THROW(validate(serving));
  set_serving_option(serving, "c128_page_stride_bytes", "auto");
  EXPECT_FALSE(serving.c128_page_stride_bytes.has_value());
  EXPECT_EQ(serving_option_names().size(), 8u);
}

TEST(Dsv4ServingOptions, DtypeNames) {
  EXPECT_EQ(parse_kv_cache_dtype("fp8_ds_mla"), KvCacheDtype::fp8_ds_mla);
  EXPECT_EQ(parse_kv_cache_dtype("bf16"), KvCacheDtype::bf16);
  EXPECT_EQ(parse_kv_cache_dtype("auto"), KvCacheDtype::bf16);
  EXPECT_EQ(parse_kv_cache_dtype("fp8"), KvCacheDtype::fp8_e4m3);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e4m3"), KvCacheDtype::fp8_e4m3);
  EXPECT_EQ(parse_indexer_dtype("fp8"), IndexerDtype::fp8);
  EXPECT_EQ(parse_indexer_dtype("mxfp4"), IndexerDtype::mxfp4);
  EXPECT_EQ(to_string(KvCacheDtype::fp8_e4m3), "fp8_e4m3");
  EXPECT_EQ(to_string(IndexerDtype::mxfp4), "mxfp4");
  EXPECT_EQ(to_string(FloatDtype::bf16), "bfloat16");
}

TEST(Dsv4ServingOptions, ParseErrors) {
  ServingConfig serving;
  expect_config_error([&] { set_serving_option(serving, "kv_cache_dtype", "fp16"); },
                      {"'kv_cache_dtype'", "'fp16'", "fp8_ds_mla, bf16, auto, fp8, fp8_e4m3"});
  expect_config_error([&] { set_serving_option(serving, "indexer_dtype", "fp4"); },
                      {"'indexer_dtype'", "'fp4'", "fp8, mxfp4"});
  for (const char* bad : {"abc", "12x", "", "1.5", "99999999999"}) {
    expect_config_error([&] { set_serving_option(serving, "block_size", bad); },
                        {"'block_size'", "expected an integer", std::string("'") + bad + "'"});
  }
  expect_config_error([&] { set_serving_option(serving, "page_size", "256"); },
                      {"unknown option 'page_size'", "block_size", "c128_page_stride_bytes"});
  EXPECT_EQ(serving, ServingConfig{});  // failed options leave the config unchanged
}

TEST(Dsv4ServingOptions, ValidationNamesTheOption) {
  const auto invalid = [](const char* option, const char* value,
                          std::initializer_list<std::string> fragments) {
    ServingConfig serving;
    set_serving_option(serving, option, value);
    expect_config_error([&serving] { validate(serving); }, fragments);
  };
  invalid("block_size", "-1", {"'block_size'", ">= 0", "-1"});
  invalid("max_num_batched_tokens", "0", {"'max_num_batched_tokens'", ">= 1"});
  invalid("dcp_world_size", "0", {"'dcp_world_size'", ">= 1"});
  invalid("cp_interleave", "0", {"'cp_interleave'", ">= 1"});
  invalid("target_arch", "hopper", {"'target_arch'", "'hopper'"});
  // B_k = 2 at block 256: at least 1168 bytes, and a multiple of 32.
  invalid("c128_page_stride_bytes", "1152", {"'c128_page_stride_bytes'", "1168", "1152"});
  invalid("c128_page_stride_bytes", "1200", {"'c128_page_stride_bytes'", "multiple of 32"});
  // MXFP4 only on sm_100-family targets.
  invalid("indexer_dtype", "mxfp4", {"'indexer_dtype'", "mxfp4", "sm_100", "'sm_90a'"});
  ServingConfig blackwell_consumer;
  blackwell_consumer.indexer_dtype = IndexerDtype::mxfp4;
  blackwell_consumer.target_arch = "sm_120a";
  expect_config_error([&] { validate(blackwell_consumer); }, {"'indexer_dtype'", "'sm_120a'"});
  blackwell_consumer.target_arch = "sm_100f";
  EXPECT_NO_THROW(validate(blackwell_consumer));
  // The smallest legal override for B_k = 2 is 1184 (1168 rounded up to 32).
  ServingConfig tight;
  tight.c128_page_stride_bytes = 1184;
  EXPECT_NO_THROW(validate(tight));
}

// --- JSON round trip -------------------------------------------------------------------------

TEST(Dsv4ConfigJson, DefaultRoundTrip) {
  const Dsv4Config config = default_config();
  const json document = config;
  EXPECT_EQ(document.at("model").at("compress_ratios").size(), 44u);  // 43 + MTP
  EXPECT_EQ(document.at("model").at("torch_dtype"), "bfloat16");
  EXPECT_EQ(document.at("model").at("name"), "dsv4-flash");
  const json expected_serving = json::parse(R"({
      "block_size": 256, "kv_cache_dtype": "fp8_ds_mla", "indexer_dtype": "fp8",
      "max_num_batched_tokens": 8192, "target_arch": "sm_90a", "dcp_world_size": 1,
      "cp_interleave": 1, "c128_page_stride_bytes": null})");
  EXPECT_EQ(document.at("serving"), expected_serving);
  EXPECT_EQ(json::parse(document.dump()).get<Dsv4Config>(), config);
}

TEST(Dsv4ConfigJson, NonDefaultRoundTrip) {
  ServingConfig serving;
  serving.block_size = 64;
  serving.kv_cache_dtype = KvCacheDtype::fp8_e4m3;
  serving.indexer_dtype = IndexerDtype::mxfp4;
  serving.max_num_batched_tokens = 2048;
  serving.target_arch = "sm_100a";
  serving.dcp_world_size = 4;
  serving.cp_interleave = 8;
  serving.c128_page_stride_bytes = 39168;
  ModelConfig model = dsv4_pro();
  model.dtype = FloatDtype::f32;
  model.rms_norm_eps = 1.0 / 3.0;  // a value with no short decimal form
  const Dsv4Config config = config_with(model, serving);
  EXPECT_EQ(json::parse(json(config).dump()).get<Dsv4Config>(), config);
  // The model part is itself a loadable config.json.
  EXPECT_EQ(model_config_from_json(json(model), "saved"), model);
}

TEST(Dsv4ConfigJson, ServingJsonDefaultsAndErrors) {
  EXPECT_EQ(json::parse(R"({"block_size": 64})").get<ServingConfig>().block_size, 64);
  EXPECT_EQ(json::object().get<ServingConfig>(), ServingConfig{});
  expect_config_error([] { json::parse(R"({"blocksize": 64})").get<ServingConfig>(); },
                      {"unknown option 'blocksize'"});
  expect_config_error([] { json::parse(R"({"block_size": "64"})").get<ServingConfig>(); },
                      {"'block_size'", "must be an integer"});
  expect_config_error([] { json::parse(R"({"kv_cache_dtype": "int8"})").get<ServingConfig>(); },
                      {"'kv_cache_dtype'", "'int8'"});
  expect_config_error([] { json::parse(R"({"dcp_world_size": 0})").get<ServingConfig>(); },
                      {"'dcp_world_size'"});
  expect_config_error([] { json::parse(R"({"model": {}})").get<Dsv4Config>(); },
                      {"'model' and 'serving'"});
}

}  // namespace
}  // namespace zerojit::dsv4

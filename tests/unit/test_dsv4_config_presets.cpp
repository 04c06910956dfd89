// The DSv4 model presets and the page-geometry helpers, written out by hand from the spec
// (§0.4) and the published model configs.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "unit/dsv4_config_support.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::config_testing;
using nlohmann::json;

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

}  // namespace
}  // namespace zerojit::dsv4

// The DSv4 configuration's JSON form: round trips and the serving object's errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "unit/dsv4_config_support.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::config_testing;
using nlohmann::json;

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

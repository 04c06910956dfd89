// Loading DSv4 models from Hugging Face config.json documents and files.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "unit/dsv4_config_support.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::config_testing;
using nlohmann::json;

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
      {"malformed_not_utf8.json", {"not UTF-8", "offset 81", "line 5, column 9", "0xE9"}},
      {"malformed_number_overflow.json", {"'head_dim'", "out of range", "1e400"}},
      {"malformed_deep_nesting.json", {"'head_dim[0][0]", "deeper than 64"}},
  };
  for (const Case& test_case : cases) {
    SCOPED_TRACE(test_case.file);
    const std::filesystem::path path = fixture(test_case.file);
    try {
      load_model_config(path);
      ADD_FAILURE() << "expected a ConfigError";
    } catch (const ConfigError& error) {
      const std::string message = error.what();
      EXPECT_TRUE(prints_as_json(message)) << message;
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

}  // namespace
}  // namespace zerojit::dsv4

// Helpers the DSv4 configuration tests share (test_dsv4_config_*.cpp).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dsv4/config/config.hpp"
#include "dsv4/family.hpp"

namespace zerojit::dsv4::config_testing {

inline std::filesystem::path data_dir() {
#ifdef ZEROJIT_DSV4_TEST_DATA_DIR
  return std::filesystem::path(ZEROJIT_DSV4_TEST_DATA_DIR);
#else
  // tests/unit/<this file> -> tests/data/dsv4
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "data" / "dsv4";
#endif
}

inline std::filesystem::path fixture(const char* name) { return data_dir() / name; }

// Runs `action`, expects a ConfigError, and checks that its message holds every fragment.
inline void expect_config_error(const std::function<void()>& action,
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

// True when `text` can go into a JSON document: the tool's --json output and the Python
// binding print every message there, and nlohmann refuses text that is not UTF-8 (type_error
// 316, which once aborted the tool).
inline bool prints_as_json(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// A small head-512 model with the given decoder ratios and no MTP layer.
inline ModelConfig model_with_ratios(std::vector<int> ratios) {
  ModelConfig model = dsv4_flash();
  model.name = "test-model";
  model.num_hidden_layers = static_cast<int>(ratios.size());
  model.compress_ratios = std::move(ratios);
  model.num_nextn_predict_layers = 0;
  model.mtp_compress_ratios.clear();
  return model;
}

inline Dsv4Config config_with(ModelConfig model, ServingConfig serving = {}) {
  Dsv4Config config{std::move(model), std::move(serving)};
  validate(config);
  return config;
}

struct NoKernels {
  bool indexer_q, dequant_gather, c4_ds_mla, c4_full, c128_compress, c128_ds_mla, c128_full, dcp;
};

inline NoKernels absent(const Dsv4Config& config) {
  return {!indexer_q_gate(config),       dequant_gather_calls(config).empty(),
          !c4_ds_mla_store_gate(config), !c4_full_store_gate(config),
          !c128_compress_gate(config),   !c128_ds_mla_store_gate(config),
          !c128_full_store_gate(config), !dcp_pack_gate(config)};
}

}  // namespace zerojit::dsv4::config_testing

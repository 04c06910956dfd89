// The DSv4 serving options: their text form and their validation.
#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "unit/dsv4_config_support.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::config_testing;
using nlohmann::json;

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

TEST(Dsv4ServingOptions, ValuesThatAreNotUtf8OrLongAreQuotedSafely) {
  // `zerojit keys --arch $'sm_9\xff' --json` once aborted printing the message as JSON.
  const auto safe_error = [](const std::function<void()>& action,
                             std::initializer_list<std::string> fragments) {
    try {
      action();
      ADD_FAILURE() << "expected a ConfigError";
    } catch (const ConfigError& error) {
      const std::string message = error.what();
      EXPECT_TRUE(prints_as_json(message)) << message;
      EXPECT_LT(message.size(), 400u) << message;
      for (const std::string& fragment : fragments) {
        EXPECT_NE(message.find(fragment), std::string::npos)
            << "message lacks '" << fragment << "': " << message;
      }
    }
  };
  ServingConfig serving;
  set_serving_option(serving, "target_arch", "sm_9\xff");
  safe_error([&serving] { validate(serving); }, {"'target_arch'", "'sm_9\\xFF'"});
  safe_error([] { target_sm_version(std::string(10000, 'x')); }, {"'target_arch'", "xxx..."});
  ServingConfig unchanged;
  safe_error([&] { set_serving_option(unchanged, "block_size", "\xff\xfe"); },
             {"'block_size'", "'\\xFF\\xFE'"});
  safe_error([&] { set_serving_option(unchanged, "kv_cache_dtype", "fp8\x80"); },
             {"'kv_cache_dtype'", "'fp8\\x80'"});
  safe_error([&] { set_serving_option(unchanged, "indexer_dtype", std::string(5000, 'z')); },
             {"'indexer_dtype'", "zzz..."});
  safe_error([&] { set_serving_option(unchanged, "\xc3(", "1"); },
             {"unknown option '\\xC3('", "block_size"});
  safe_error([] { json::parse(R"({"no\u0001such": 1})").get<ServingConfig>(); },
             {"unknown option 'no\\x01such'"});
  EXPECT_EQ(unchanged, ServingConfig{});
}

TEST(Dsv4ServingOptions, ValidationNamesTheOption) {
  const auto invalid = [](const char* option, const char* value,
                          std::initializer_list<std::string> fragments) {
    ServingConfig serving;
    set_serving_option(serving, option, value);
    expect_config_error([&serving] { validate(serving); }, fragments);
  };
  invalid("block_size", "-1", {"'block_size'", ">= 0", "-1"});
  // Past the ceiling page sizes overflowed the kernels' int arithmetic (found by
  // fuzz_dsv4_config: block_size 99999999).
  invalid("block_size", "65537", {"'block_size'", "<= 65536", "65537"});
  invalid("block_size", "99999999", {"'block_size'", "<= 65536"});
  invalid("c128_page_stride_bytes", "1073741856",
          {"'c128_page_stride_bytes'", "<= 1073741824", "1073741856"});
  invalid("max_num_batched_tokens", "0", {"'max_num_batched_tokens'", ">= 1"});
  // Beyond the documented ceiling (once a warmup space that never ended, at 2^62).
  invalid("max_num_batched_tokens", "16777217",
          {"'max_num_batched_tokens'", "<= 16777216", "16777217"});
  invalid("max_num_batched_tokens", "4611686018427387904",
          {"'max_num_batched_tokens'", "<= 16777216", "4611686018427387904"});
  ServingConfig ceiling;
  ceiling.max_num_batched_tokens = kMaxNumBatchedTokens;
  EXPECT_NO_THROW(validate(ceiling));
  invalid("dcp_world_size", "0", {"'dcp_world_size'", ">= 1"});
  invalid("cp_interleave", "0", {"'cp_interleave'", ">= 1"});
  invalid("target_arch", "hopper", {"'target_arch'", "'hopper'"});
  // Pre-Hopper targets: one error naming the option (before: every dequant-gather key, and on
  // sm_80 seven of nine, failed in NVRTC one by one).
  invalid("target_arch", "sm_89", {"'target_arch'", "sm_90 or newer", "'sm_89'"});
  invalid("target_arch", "sm_80", {"'target_arch'", "sm_90 or newer", "'sm_80'"});
  ServingConfig hopper;
  hopper.target_arch = "sm_90";
  EXPECT_NO_THROW(validate(hopper));
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
  ServingConfig largest;
  largest.block_size = kMaxBlockSize;
  largest.c128_page_stride_bytes = kMaxC128PageStrideBytes;
  EXPECT_NO_THROW(validate(largest));
}

}  // namespace
}  // namespace zerojit::dsv4

// The configuration refuses exactly what the DSv4 kernels cannot build, naming the config
// field. Each gate refuses its kernel's domain (validate_for_kernels walks the family table);
// these tests ask the kernels themselves over each field's values, so the gates' rules and the
// kernels' key checks cannot drift apart: a value validation accepts builds the manifest and
// every key's program, and a value the kernels accept passes validation.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "dsv4/family.hpp"
#include "unit/dsv4_config_support.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::config_testing;

// The ConfigError validation raises, or nothing.
std::optional<std::string> refusal(const Dsv4Config& config) {
  try {
    validate_for_kernels(config);
  } catch (const ConfigError& error) {
    return std::string(error.what());
  }
  return std::nullopt;
}

// Builds the warmup manifest and every key's program, as `zerojit keys` and warmup do; returns
// what failed, or nothing.
std::optional<std::string> manifest_failure(const Dsv4Config& config) {
  try {
    WarmupRegistry registry;
    AttentionKernels(config).register_warmup(registry);
    for (const ManifestEntry& entry : registry.manifest().entries) (void)entry.program();
  } catch (const std::exception& error) {
    return std::string(error.what());
  }
  return std::nullopt;
}

// Whether a kernel accepts every key of a warmup space: dispatch at each point, then program.
template <class Kernel, class Space>
bool kernel_builds(const Kernel& kernel, const Space& space) {
  try {
    for (const auto& key :
         space.expand([&kernel](const auto& d) { return kernel.dispatch(d); }).keys) {
      (void)kernel.program(key);
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Whether the indexer kernel of `variant` builds every key of its warmup space for these
// dimensions (64 heads, up to 8192 tokens).
bool indexer_builds(IndexerDtype variant, int head_dim, int rope_dim) {
  const IndexerQGate gate{variant, head_dim, rope_dim, 64, FloatDtype::f32, 8192};
  if (variant == IndexerDtype::fp8) {
    const IndexerQFp8Kernel& kernel = IndexerQFp8Kernel::instance();
    return kernel_builds(kernel, kernel.warmup_space(gate));
  }
  const IndexerQMxFp4Kernel& kernel = IndexerQMxFp4Kernel::instance();
  return kernel_builds(kernel, kernel.warmup_space(gate));
}

// A model whose indexer runs but whose compressors do not (head_dim 256), so that the
// indexer's rules alone decide.
Dsv4Config indexer_only(int index_head_dim, int rope_dim, IndexerDtype variant) {
  Dsv4Config config = default_config();
  config.model.head_dim = 256;
  config.model.index_head_dim = index_head_dim;
  config.model.qk_rope_head_dim = rope_dim;
  if (variant == IndexerDtype::mxfp4) {
    config.serving.indexer_dtype = IndexerDtype::mxfp4;
    config.serving.target_arch = "sm_100a";
  }
  return config;
}

TEST(Dsv4ConfigKernelDomains, IndexerFieldsAgreeWithTheIndexerKernel) {
  for (const IndexerDtype variant : {IndexerDtype::fp8, IndexerDtype::mxfp4}) {
    std::vector<std::pair<int, int>> cases;  // (index_head_dim, qk_rope_head_dim)
    for (int head = 1; head <= 1100; ++head) cases.push_back({head, std::min(head, 64)});
    for (int rope = 1; rope <= 256; ++rope) cases.push_back({256, rope});
    int accepted = 0;
    for (const auto& [head, rope] : cases) {
      SCOPED_TRACE("index_head_dim " + std::to_string(head) + ", qk_rope_head_dim " +
                   std::to_string(rope) + ", " + std::string(to_string(variant)));
      const Dsv4Config config = indexer_only(head, rope, variant);
      const bool builds = indexer_builds(variant, head, rope);
      const std::optional<std::string> refused = refusal(config);
      ASSERT_EQ(!refused.has_value(), builds) << refused.value_or("(accepted)");
      if (refused) {
        EXPECT_TRUE(refused->find("field 'index_head_dim'") != std::string::npos ||
                    refused->find("field 'qk_rope_head_dim'") != std::string::npos)
            << *refused;
        EXPECT_NE(refused->find("DSv4 uses"), std::string::npos) << *refused;
      } else {
        ++accepted;
        EXPECT_EQ(manifest_failure(config), std::nullopt);
      }
    }
    EXPECT_GT(accepted, 10);
  }
}

TEST(Dsv4ConfigKernelDomains, CompressorsNeedTheSixtyFourDimRopeTail) {
  // The compressor keys carry the width of the cos/sin cache the layer passes, which is
  // qk_rope_head_dim wide.
  const auto c4_builds = [](int rope) {
    C4StoreKernel& kernel = C4StoreKernel::instance();
    bool ok = true;
    kernel.warmup_space(C4DsMlaStoreGate{512, 1024, 64, FloatDtype::bf16, 64})
        .for_each_point(
            [&](std::size_t, const std::vector<std::size_t>&, const C4StoreDescriptors* point) {
              if (point == nullptr) return;
              C4StoreDescriptors d = *point;
              d.cos_sin_cache = TensorDesc::contiguous(DType::f32, {65536, rope});
              try {
                (void)kernel.program(kernel.dispatch(d));
              } catch (const std::exception&) {
                ok = false;
              }
            });
    return ok;
  };
  for (const int rope : {0, 16, 32, 48, 63, 64, 65, 96, 128}) {
    SCOPED_TRACE(rope);
    Dsv4Config config = default_config();
    config.model.qk_rope_head_dim = rope;
    const std::optional<std::string> refused = refusal(config);
    EXPECT_EQ(!refused.has_value(), c4_builds(rope)) << refused.value_or("(accepted)");
    if (refused) {
      // The indexer's rule may speak first (63, 65: not a multiple of 16).
      EXPECT_NE(refused->find("field 'qk_rope_head_dim' must be"), std::string::npos) << *refused;
      if (rope % 16 == 0) {
        EXPECT_NE(refused->find("must be 64"), std::string::npos) << *refused;
      }
    }
  }
  // Without a compressed layer the compressors never run and the tail is the indexer's affair.
  Dsv4Config window_only = default_config();
  window_only.model = model_with_ratios({0, 0});
  window_only.model.qk_rope_head_dim = 32;
  EXPECT_EQ(refusal(window_only), std::nullopt);
  EXPECT_EQ(manifest_failure(window_only), std::nullopt);
}

TEST(Dsv4ConfigKernelDomains, DcpTopkAgreesWithTheDcpPackKernel) {
  const DcpPackKernel& kernel = DcpPackKernel::instance();
  for (int topk = 0; topk <= 4096; ++topk) {
    Dsv4Config config = default_config();
    config.model.index_topk = topk;
    config.serving.dcp_world_size = 2;
    const bool builds =
        topk > 0 && kernel_builds(kernel, kernel.warmup_space(DcpPackGate{topk, 2, 1}));
    const std::optional<std::string> refused = refusal(config);
    // index_topk 0 turns the pack off (no top-k to exchange): accepted, nothing to build.
    ASSERT_EQ(!refused.has_value(), builds || topk == 0)
        << topk << ": " << refused.value_or("(accepted)");
    if (refused) {
      EXPECT_NE(refused->find("field 'index_topk' must be 512, 1024 or 2048"), std::string::npos);
      EXPECT_NE(refused->find("dcp_world_size 1"), std::string::npos);
    }
    // Without DCP any top-k is the indexer's business only.
    config.serving.dcp_world_size = 1;
    EXPECT_EQ(refusal(config), std::nullopt) << topk;
  }
}

TEST(Dsv4ConfigKernelDomains, ChecksApplyOnlyWhereTheGatesRunTheKernel) {
  // Validation restates when a kernel runs; out-of-domain values for a kernel its gate turns
  // off must pass, and the gate must indeed be off.
  struct Case {
    const char* what;
    void (*apply)(Dsv4Config&);
  };
  const Case cases[] = {
      {"no KV cache",
       [](Dsv4Config& c) {
         c.serving.block_size = 0;
         c.serving.dcp_world_size = 2;
         c.model.qk_rope_head_dim = 7;
         c.model.index_head_dim = 100;
         c.model.index_topk = 100;
       }},
      {"no compressed layer",
       [](Dsv4Config& c) {
         c.model = model_with_ratios({0, 0, 0});
         c.model.qk_rope_head_dim = 7;
         c.model.index_head_dim = 100;
       }},
      {"no indexer heads",
       [](Dsv4Config& c) {
         c.model.index_n_heads = 0;
         c.model.index_head_dim = 100;
         c.serving.dcp_world_size = 2;
         c.model.index_topk = 100;
       }},
      {"another head size",
       [](Dsv4Config& c) {
         c.model.head_dim = 256;
         c.model.qk_rope_head_dim = 32;
       }},
      {"ratio 128 only, no indexer",
       [](Dsv4Config& c) {
         c.model = model_with_ratios({128, 0});
         c.model.index_head_dim = 100;
       }},
  };
  for (const Case& test_case : cases) {
    SCOPED_TRACE(test_case.what);
    Dsv4Config config = default_config();
    test_case.apply(config);
    EXPECT_EQ(refusal(config), std::nullopt);
    EXPECT_EQ(manifest_failure(config), std::nullopt);
    if (config.model.index_head_dim == 100) {
      EXPECT_FALSE(indexer_q_gate(config).has_value());
    }
    if (config.model.index_topk == 100) {
      EXPECT_FALSE(dcp_pack_gate(config).has_value());
    }
    if (config.model.qk_rope_head_dim != 64) {
      EXPECT_FALSE(c4_ds_mla_store_gate(config).has_value());
      EXPECT_FALSE(c128_compress_gate(config).has_value());
    }
  }
}

TEST(Dsv4ConfigKernelDomains, NoFieldValueReachesAKernelError) {
  // Every numeric field of the config.json over values in and out of each domain, under the
  // serving configurations that change which kernels run: validation accepts and the manifest
  // builds, or validation refuses naming a config field or serving option.
  struct Variant {
    const char* name;
    void (*apply)(ServingConfig&);
  };
  const Variant variants[] = {
      {"defaults", [](ServingConfig&) {}},
      {"mxfp4",
       [](ServingConfig& s) {
         s.indexer_dtype = IndexerDtype::mxfp4;
         s.target_arch = "sm_100a";
       }},
      {"dcp 2", [](ServingConfig& s) { s.dcp_world_size = 2; }},
      {"bf16 cache", [](ServingConfig& s) { s.kv_cache_dtype = KvCacheDtype::bf16; }},
      {"block 1", [](ServingConfig& s) { s.block_size = 1; }},
      {"no cache", [](ServingConfig& s) { s.block_size = 0; }},
  };
  const std::vector<long long> values = {-1,  0,   1,    2,    3,    7,    16,    32,        48,
                                         63,  64,  65,   96,   100,  128,  129,   256,       511,
                                         512, 513, 1000, 1024, 2048, 4096, 65536, 2147483647};
  using Set = void (*)(ModelConfig&, long long);
  const std::vector<std::pair<const char*, Set>> fields = {
      {"head_dim", [](ModelConfig& m, long long v) { m.head_dim = static_cast<int>(v); }},
      {"qk_rope_head_dim",
       [](ModelConfig& m, long long v) { m.qk_rope_head_dim = static_cast<int>(v); }},
      {"index_n_heads", [](ModelConfig& m, long long v) { m.index_n_heads = static_cast<int>(v); }},
      {"index_head_dim",
       [](ModelConfig& m, long long v) { m.index_head_dim = static_cast<int>(v); }},
      {"index_topk", [](ModelConfig& m, long long v) { m.index_topk = static_cast<int>(v); }},
      {"sliding_window",
       [](ModelConfig& m, long long v) { m.sliding_window = static_cast<int>(v); }},
      {"max_position_embeddings",
       [](ModelConfig& m, long long v) { m.max_position_embeddings = v; }},
      {"rms_norm_eps",
       [](ModelConfig& m, long long v) { m.rms_norm_eps = static_cast<double>(v); }},
      {"compress_rope_theta",
       [](ModelConfig& m, long long v) { m.compress_rope_theta = static_cast<double>(v); }},
  };
  const auto start = std::chrono::steady_clock::now();
  int accepted = 0;
  for (const Variant& variant : variants) {
    for (const auto& [field, set] : fields) {
      for (const long long value : values) {
        SCOPED_TRACE(std::string(variant.name) + ": " + field + " = " + std::to_string(value));
        Dsv4Config config = default_config();
        variant.apply(config.serving);
        set(config.model, value);
        if (const std::optional<std::string> refused = refusal(config)) {
          EXPECT_TRUE(refused->find("field '") != std::string::npos ||
                      refused->find("option '") != std::string::npos)
              << *refused;
          EXPECT_NE(refused->find("'dsv4-flash'"), std::string::npos) << *refused;
        } else {
          ++accepted;
          EXPECT_EQ(manifest_failure(config), std::nullopt);
        }
      }
    }
  }
  EXPECT_GT(accepted, 100);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(Dsv4ConfigKernelDomains, TheLargestBoundsBuildTheirManifestQuickly) {
  const auto start = std::chrono::steady_clock::now();
  Dsv4Config config = default_config();
  config.serving.max_num_batched_tokens = kMaxNumBatchedTokens;
  EXPECT_EQ(manifest_failure(config), std::nullopt);
  // The largest pages, in every cache layout (block_size * 584 once overflowed an int).
  for (const KvCacheDtype cache :
       {KvCacheDtype::fp8_ds_mla, KvCacheDtype::bf16, KvCacheDtype::fp8_e4m3}) {
    Dsv4Config pages = config;
    pages.serving.kv_cache_dtype = cache;
    pages.serving.block_size = kMaxBlockSize;
    if (cache == KvCacheDtype::fp8_ds_mla) {
      pages.serving.c128_page_stride_bytes = kMaxC128PageStrideBytes;
    }
    EXPECT_EQ(manifest_failure(pages), std::nullopt) << to_string(cache);
  }
  // Past the ceiling (the reproduction: 2^62, once a warmup space that never ended) the
  // configuration is refused before any space is built.
  config.serving.max_num_batched_tokens = std::int64_t{1} << 62;
  expect_config_error([&config] { AttentionKernels{config}; },
                      {"'max_num_batched_tokens'", "<= 16777216"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace zerojit::dsv4

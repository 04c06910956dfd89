// The DSv4 warmup manifest per configuration, the dispatch vectors of the spec, every key
// compiling for sm_90a and sm_100a, and the argument checks of every kernel owner.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "dsv4/family.hpp"
#include "support/core_fixture.hpp"

namespace zerojit::dsv4 {
namespace {

using zerojit::testing::CoreTest;

std::vector<std::string> manifest_lines(const Dsv4Config& config) {
  WarmupRegistry registry;
  AttentionKernels(config).register_warmup(registry);
  return registry.manifest().lines();
}

const std::string kIndexerFp8 =
    "dsv4.indexer_q_fp8 head_dim=128, rope_dim=64, num_heads=64, cos_sin_dtype=f32, coarsen=";
const std::string kIndexerMxFp4 =
    "dsv4.indexer_q_mxfp4 head_dim=128, rope_dim=64, num_heads=64, cos_sin_dtype=f32, coarsen=";
// The compressor keys hold what their kernels specialize on (the head, RoPE width, quantization
// and ratio are constants of the kernels, refused otherwise by dispatch).
const std::string kC4 = "dsv4.c4_store norm_weight_dtype=bf16";
// Section 11's C128 compress key, as a decode and a prefill scan (DESIGN.md, "C128 compress").
const std::string kC128CompressDecode = "dsv4.c128_compress head_size=512, cta_scan=false";
const std::string kC128CompressPrefill = "dsv4.c128_compress head_size=512, cta_scan=true";
std::string c128_store(int rows, int stride) {
  return "dsv4.c128_store kv_block_stride=" + std::to_string(stride) +
         ", norm_weight_dtype=bf16, kv_cache_block_size=" + std::to_string(rows);
}
std::string gather(int block, bool lens) {
  return "dsv4.dequant_gather block_size=" + std::to_string(block) +
         ", has_gather_lens=" + (lens ? "true" : "false");
}
std::string c4_full(bool fp8) {
  return std::string("dsv4.c4_store_full store_full_fp8=") + (fp8 ? "true" : "false") +
         ", norm_weight_dtype=bf16";
}
std::string c128_full(bool fp8) {
  return std::string("dsv4.c128_store_full store_full_fp8=") + (fp8 ? "true" : "false") +
         ", norm_weight_dtype=bf16";
}

TEST(Dsv4Manifest, DefaultConfigIsSection11sKeysWithBothC128CompressScans) {
  EXPECT_EQ(manifest_lines(default_config()),
            (std::vector<std::string>{kIndexerFp8 + "1", kIndexerFp8 + "4", gather(256, true),
                                      gather(64, false), gather(2, false), kC4, kC128CompressDecode,
                                      kC128CompressPrefill, c128_store(2, 1728)}));
}

TEST(Dsv4Manifest, MxFp4IndexerOnBlackwell) {
  Dsv4Config config = default_config();
  config.serving.indexer_dtype = IndexerDtype::mxfp4;
  config.serving.target_arch = "sm_100a";
  const auto lines = manifest_lines(config);
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(lines[0], kIndexerMxFp4 + "1");
  EXPECT_EQ(lines[1], kIndexerMxFp4 + "4");
}

TEST(Dsv4Manifest, FullCachesReplaceTheDsMlaStores) {
  for (const bool fp8 : {false, true}) {
    Dsv4Config config = default_config();
    config.serving.kv_cache_dtype = fp8 ? KvCacheDtype::fp8_e4m3 : KvCacheDtype::bf16;
    EXPECT_EQ(manifest_lines(config),
              (std::vector<std::string>{kIndexerFp8 + "1", kIndexerFp8 + "4", gather(256, true),
                                        gather(64, false), gather(2, false), c4_full(fp8),
                                        kC128CompressDecode, kC128CompressPrefill, c128_full(fp8)}))
        << (fp8 ? "fp8_e4m3" : "bf16");
  }
}

TEST(Dsv4Manifest, BlockSize64AndPackedPageStride) {
  Dsv4Config config = default_config();
  config.serving.block_size = 64;
  EXPECT_EQ(manifest_lines(config),
            (std::vector<std::string>{kIndexerFp8 + "1", kIndexerFp8 + "4", gather(64, true),
                                      gather(16, false), gather(1, false), kC4, kC128CompressDecode,
                                      kC128CompressPrefill, c128_store(1, 1152)}));
  config = default_config();
  config.serving.c128_page_stride_bytes = 39168;
  EXPECT_EQ(manifest_lines(config).back(), c128_store(2, 39168));
}

TEST(Dsv4Manifest, CompressRatiosDecideTheCompressorsAndTheIndexer) {
  Dsv4Config only_c4 = default_config();
  for (int& ratio : only_c4.model.compress_ratios) ratio = ratio == 128 ? 0 : ratio;
  only_c4.model.mtp_compress_ratios.assign(only_c4.model.mtp_compress_ratios.size(), 0);
  EXPECT_EQ(manifest_lines(only_c4),
            (std::vector<std::string>{kIndexerFp8 + "1", kIndexerFp8 + "4", gather(256, true),
                                      gather(64, false), kC4}));
  Dsv4Config none = only_c4;
  for (int& ratio : none.model.compress_ratios) ratio = 0;
  EXPECT_EQ(manifest_lines(none), std::vector<std::string>{gather(256, true)});
}

TEST(Dsv4Manifest, SmallBatchesNeverReachCoarsen4OrThePrefillScanAndBlockSize0GivesNothing) {
  Dsv4Config config = default_config();
  config.serving.max_num_batched_tokens = 256;
  const auto lines = manifest_lines(config);
  EXPECT_EQ(lines[0], kIndexerFp8 + "1");
  EXPECT_NE(lines[1], kIndexerFp8 + "4");
  // Nor the prefill scan of C128 compress (above 1024 tokens).
  EXPECT_EQ(std::count(lines.begin(), lines.end(), kC128CompressDecode), 1);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), kC128CompressPrefill), 0);
  config = default_config();
  config.serving.block_size = 0;
  EXPECT_TRUE(manifest_lines(config).empty());
}

TEST(Dsv4Manifest, DcpAddsTwoPackKeys) {
  Dsv4Config config = default_config();
  config.serving.dcp_world_size = 2;
  const auto lines = manifest_lines(config);
  ASSERT_EQ(lines.size(), 11u);
  EXPECT_EQ(lines[9],
            "dsv4.dcp_pack topk=512, has_row_starts=false, dcp_world_size=2, cp_interleave=1");
  EXPECT_EQ(lines[10],
            "dsv4.dcp_pack topk=512, has_row_starts=true, dcp_world_size=2, cp_interleave=1");
}

TEST(Dsv4Dispatch, C128StorePageStrides) {
  auto& kernel = C128StoreKernel::instance();
  C128StoreDescriptors d;
  d.rms_norm_weight = TensorDesc::contiguous(DType::bf16, {512});
  d.cos_sin_cache = TensorDesc::contiguous(DType::f32, {1024, 64});
  struct Vector {
    int rows;
    std::int64_t page_stride;
    int expected_rows;
    std::int64_t expected_stride;
  };
  for (const Vector v :
       {Vector{1, 1152, 1, 1152}, Vector{2, 1728, 2, 1728}, Vector{2, 39168, 2, 39168}}) {
    const std::int64_t shape[] = {16, v.rows, 584};
    const std::int64_t strides[] = {v.page_stride, 584, 1};
    d.k_cache = TensorDesc::strided(DType::u8, shape, strides);
    C128StoreKey expected;
    expected.kv_cache_block_size = v.expected_rows;
    expected.kv_block_stride = v.expected_stride;
    EXPECT_EQ(kernel.dispatch(d), expected) << v.page_stride;
  }
}

TEST(Dsv4Dispatch, IndexerCoarsenAndDequantGatherKeys) {
  auto& indexer = IndexerQFp8Kernel::instance();
  IndexerQFp8Descriptors d;
  d.q = TensorDesc::contiguous(DType::bf16, {511, 64, 128});
  d.cos_sin_cache = TensorDesc::contiguous(DType::bf16, {4096, 64});
  EXPECT_EQ(indexer.dispatch(d), (IndexerQKey{128, 64, 64, DType::bf16, 1}));
  d.q.shape[0] = 512;
  EXPECT_EQ(indexer.dispatch(d).coarsen, 4);
  d.q.shape[1] = 6;  // 4 does not divide the heads: one head per subwarp at any T
  EXPECT_EQ(indexer.dispatch(d).coarsen, 1);
  // The FP8 kernel's tile holds at most a row's lanes (head_dim / 16) heads; MXFP4 has no cap.
  d.q.shape[1] = 8;
  d.q.shape[2] = 32;
  d.cos_sin_cache.shape[1] = 32;
  EXPECT_EQ(indexer.dispatch(d).coarsen, 2);
  IndexerQMxFp4Descriptors mxfp4;  // the same inputs; dispatch reads no output
  mxfp4.q = d.q;
  mxfp4.cos_sin_cache = d.cos_sin_cache;
  EXPECT_EQ(IndexerQMxFp4Kernel::instance().dispatch(mxfp4).coarsen, 4);
  d.q.shape[2] = 16;
  d.cos_sin_cache.shape[1] = 16;
  EXPECT_EQ(indexer.dispatch(d).coarsen, 1);
  try {
    (void)indexer.program(IndexerQKey{32, 32, 8, DType::f32, 4});
    ADD_FAILURE() << "an FP8 key with more heads a tile than lanes a row was accepted";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("coarsen 4"), std::string::npos) << error.what();
  }
  auto& gather_kernel = DequantGatherKernel::instance();
  DequantGatherDescriptors g;
  g.k_cache = TensorDesc::contiguous(DType::u8, {8, 64, 584});
  EXPECT_EQ(gather_kernel.dispatch(g), (DequantGatherKey{64, false}));
  g.gather_lens = TensorDesc::contiguous(DType::i32, {3});
  EXPECT_EQ(gather_kernel.dispatch(g), (DequantGatherKey{64, true}));
}

class Dsv4Compile : public CoreTest {};

// Every key of every configuration above, compiled for both targets.
TEST_F(Dsv4Compile, EveryKeyOfEveryConfigCompilesForSm90aAndSm100a) {
  std::vector<Dsv4Config> configs;
  configs.push_back(default_config());
  for (auto dtype : {KvCacheDtype::bf16, KvCacheDtype::fp8_e4m3}) {
    configs.push_back(default_config());
    configs.back().serving.kv_cache_dtype = dtype;
  }
  configs.push_back(default_config());
  configs.back().serving.block_size = 64;
  configs.push_back(default_config());
  configs.back().serving.c128_page_stride_bytes = 39168;
  configs.push_back(default_config());
  configs.back().serving.dcp_world_size = 4;
  configs.back().serving.cp_interleave = 64;
  configs.push_back(default_config());
  configs.back().model = dsv4_pro();
  configs.back().serving.dcp_world_size = 8;
  WarmupRegistry registry;
  for (const auto& config : configs) AttentionKernels(config).register_warmup(registry);
  Dsv4Config mxfp4 = default_config();
  mxfp4.serving.indexer_dtype = IndexerDtype::mxfp4;
  mxfp4.serving.target_arch = "sm_100a";
  AttentionKernels(mxfp4).register_warmup(registry);
  const std::size_t keys = registry.manifest().size();
  EXPECT_GE(keys, 20u);
  for (const char* arch : {"sm_90a", "sm_100a"}) {
    const auto report = registry.warmup(
        WarmupOptions{.arch = arch, .compile_only = true, .progress = ProgressStyle::none});
    EXPECT_EQ(static_cast<std::size_t>(report.total_keys()), keys);
    for (const auto& key : report.keys) {
      EXPECT_TRUE(key.error.empty())
          << arch << ": " << key.kernel << " [" << key.key << "]: " << key.error;
    }
  }
}

}  // namespace
}  // namespace zerojit::dsv4

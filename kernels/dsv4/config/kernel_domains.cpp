// The domains of the DSv4 kernels a configuration runs, checked on the configuration and
// named by its fields. Without this a value such as qk_rope_head_dim 7 passed validation and
// failed later in a kernel's dispatch, whose message names the kernel's argument ("rope_dim 7")
// rather than the config.json field, and says nothing of the values that work.
//
// Each check applies only when the kernel runs: a model without CSA layers may have any
// index_head_dim, because the indexer never runs. Whether a kernel runs is its gate's decision
// (each kernel's gate.cpp); the gates live with the kernels, which link this library, so the
// few conditions below restate them, as the rules restate the kernels' own key checks. The
// tests hold both to the real thing: they build the manifest and every key's program over each
// field's values, and ask the gates where a check must not apply.
#include <string>

#include "dsv4/config/detail.hpp"
#include "dsv4/config/dsv4_config.hpp"
#include "dsv4/config/geometry.hpp"

namespace zerojit::dsv4::config_detail {

namespace {

bool is_power_of_two(int value) { return value > 0 && (value & (value - 1)) == 0; }

// The Lightning Indexer's query kernel: 16 elements per thread, at most one warp per head.
void check_indexer(const Dsv4Config& config) {
  const ModelConfig& model = config.model;
  const std::string_view source = model.name;
  const std::string runs =
      " for the Lightning Indexer's query kernel, which runs because some layer has compress "
      "ratio 4";
  const int head_dim = model.index_head_dim;
  if (head_dim % 16 != 0 || !is_power_of_two(head_dim / 16) || head_dim / 16 > 32) {
    fail_model(source, "field 'index_head_dim' must be 16, 32, 64, 128, 256 or 512" + runs +
                           ", got " + to_text(head_dim) + " (DSv4 uses 128)");
  }
  // MXFP4 packs 32 elements under one scale, so the rotated tail must fill whole blocks.
  const bool mxfp4 = config.serving.indexer_dtype == IndexerDtype::mxfp4;
  const int granule = mxfp4 ? 32 : 16;
  const std::string variant = mxfp4 ? " (indexer_dtype mxfp4)" : " (indexer_dtype fp8)";
  const int rope = model.qk_rope_head_dim;
  if (rope % granule != 0) {
    fail_model(source, "field 'qk_rope_head_dim' must be a multiple of " + to_text(granule) + runs +
                           variant + ", got " + to_text(rope) + " (DSv4 uses 64)");
  }
  if ((head_dim - rope) % granule != 0) {
    fail_model(source, "field 'index_head_dim' minus 'qk_rope_head_dim' (" + to_text(head_dim) +
                           " - " + to_text(rope) + ") must be a multiple of " + to_text(granule) +
                           runs + variant);
  }
}

// The fused compressor kernels are written for DSv4's 512-dim head with a 64-dim RoPE tail; they
// run only for head_dim 512, and their keys carry the tail width.
void check_compressors(const Dsv4Config& config) {
  constexpr int kCompressorRopeDim = 64;
  const ModelConfig& model = config.model;
  if (model.qk_rope_head_dim != kCompressorRopeDim) {
    fail_model(model.name,
               "field 'qk_rope_head_dim' must be 64 when head_dim is 512 and some layer has "
               "compress ratio 4 or 128: the compressor kernels rotate a 64-dim tail, got " +
                   to_text(model.qk_rope_head_dim));
  }
}

// The DCP pack kernel is instantiated for the top-k sizes DSv4's indexer selects.
void check_dcp_pack(const Dsv4Config& config) {
  const int topk = config.model.index_topk;
  if (topk != 512 && topk != 1024 && topk != 2048) {
    fail_model(config.model.name,
               "field 'index_topk' must be 512, 1024 or 2048 when decode context parallelism "
               "packs the indexer's top-k (serving option dcp_world_size " +
                   to_text(config.serving.dcp_world_size) + "), got " + to_text(topk) +
                   "; or serve with dcp_world_size 1");
  }
}

}  // namespace

void validate_kernel_domains(const Dsv4Config& config) {
  const ModelConfig& model = config.model;
  const bool has_cache = config.serving.block_size > 0;
  // indexer_q/gate.cpp: a cache, a CSA layer and all three indexer dimensions.
  const bool indexer_runs = has_cache && has_compress_ratio(model, kCsaCompressRatio) &&
                            model.index_n_heads > 0 && model.index_head_dim > 0 &&
                            model.qk_rope_head_dim > 0;
  // compressor/gate_common.hpp: a cache, a compressed layer and the 512-dim head.
  constexpr int kCompressorHeadDim = 512;
  const bool compressors_run = has_cache && model.head_dim == kCompressorHeadDim &&
                               (has_compress_ratio(model, kCsaCompressRatio) ||
                                has_compress_ratio(model, kHcaCompressRatio));
  // dcp_pack/gate.cpp: more than one rank, a top-k and the indexer that selects it.
  const bool dcp_pack_runs =
      config.serving.dcp_world_size > 1 && model.index_topk > 0 && indexer_runs;
  if (indexer_runs) check_indexer(config);
  if (compressors_run) check_compressors(config);
  if (dcp_pack_runs) check_dcp_pack(config);
}

}  // namespace zerojit::dsv4::config_detail

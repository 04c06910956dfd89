// The published DeepSeek-V4 models as built-in presets.
#pragma once

#include "dsv4/config/dsv4_config.hpp"
#include "dsv4/config/model.hpp"

namespace zerojit::dsv4 {

// DeepSeek-V4-Flash: 43 layers; compress_ratios = [0, 0, then 4, 128 alternating, ending
// with 4] (layers 2..42: even 4, odd 128), one MTP layer with ratio 0; index_topk 512.
ModelConfig dsv4_flash();
// DeepSeek-V4-Pro: 61 layers; compress_ratios = [128, 128, then 4, 128 alternating, ending
// with 4] (layers 2..60: even 4, odd 128), one MTP layer with ratio 0; index_topk 1024.
ModelConfig dsv4_pro();

// DSv4-Flash with the serving defaults (spec §11): block 256, fp8_ds_mla, FP8 indexer,
// 8192 batched tokens, sm_90a, no DCP, default page stride.
Dsv4Config default_config();

}  // namespace zerojit::dsv4

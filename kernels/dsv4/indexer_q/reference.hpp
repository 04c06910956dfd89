// CPU reference of the DSv4 indexer-Q kernels (spec section 1): RoPE of the last R dims, then
// FP8 (one pow2 scale per row, folded into the weights) or MXFP4 (one UE8M0 exponent per 32
// elements) quantization. Bit-exact with the device code: the RoPE uses the pinned FMA form
// and every rounding is the PTX instruction's (reference/numerics.hpp).
#pragma once

#include "dsv4/indexer_q/indexer_q.hpp"
#include "dsv4/indexer_q/indexer_q_params.h"

namespace zerojit::dsv4::reference {

// Writes q_fp8[t, h, :] and weights_out[t, h] for every t < num_tokens, h < H, exactly where
// indexer_q_fp8_kernel compiled for `key` does (its coarsen does not change results), from the
// host pointers in `params`. Throws std::invalid_argument naming the argument when the key
// breaks the spec's constraints or a pointer is null.
void indexer_q_fp8(const IndexerQKey& key, const zj::dsv4::IndexerQParams& params);

// Writes q_packed[t, h, :], q_scale[t, h, :] and weights_out[t, h], as indexer_q_mxfp4_kernel.
void indexer_q_mxfp4(const IndexerQKey& key, const zj::dsv4::IndexerQParams& params);

}  // namespace zerojit::dsv4::reference

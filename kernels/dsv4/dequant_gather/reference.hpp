// CPU reference of the DSv4 dequantize-and-gather kernel (spec section 2): fp8_ds_mla paged K
// cache rows -> BF16 workspace rows. Bit-exact with the device code.
#pragma once

#include "dsv4/dequant_gather/dequant_gather.hpp"
#include "dsv4/dequant_gather/dequant_gather_params.h"

namespace zerojit::dsv4::reference {

// Writes out[r, offset + i, 0:512] for every gathered position i of every request, exactly the
// rows dequant_gather_kernel compiled for `key` (its block size and gather lengths) writes
// (including its skips: rows whose destination is outside [0, M), positions < 0, block-table
// columns >= max_blocks and negative page numbers), from the host pointers in `params`.
// params.num_workers is ignored. Throws std::invalid_argument naming the argument when block_size
// is not positive or a needed pointer is null.
void dequant_gather(const DequantGatherKey& key, const zj::dsv4::DequantGatherParams& params);

}  // namespace zerojit::dsv4::reference

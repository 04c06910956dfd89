// CPU reference of the C128 compress kernel (spec section 5), for the kernel compiled for a key.
// The pooling and the comparison (compare_compressed_kv) it shares with the other compressor
// kernels are compressor/reference.hpp.
#pragma once

#include <vector>

#include "dsv4/c128_compress/c128_compress.hpp"
#include "dsv4/c128_compress/c128_compress_params.h"
#include "dsv4/compressor/reference.hpp"

namespace zerojit::dsv4::reference {

// Pools key.head_size columns of each boundary token's 128 state rows into its row of
// compressed_kv. Throws std::invalid_argument (naming the kernel and the argument) for a head
// size that is not a positive multiple of 64 or a state block size other than 8. Returns the
// token rows of compressed_kv written.
std::vector<long long> c128_compress(const C128CompressKey& key,
                                     const zj::dsv4::C128CompressParams& params);

}  // namespace zerojit::dsv4::reference

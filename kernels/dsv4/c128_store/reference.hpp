// CPU references of the C128 stores (spec sections 6 and 7), for the kernel compiled for a key:
// the fp8_ds_mla store, whose page geometry (B_k, page stride) is the key's (C128StoreKernel),
// and the full-row store (C128StoreFullKernel). The stages and comparisons they share with the
// other compressor kernels are compressor/reference.hpp.
#pragma once

#include <vector>

#include "dsv4/c128_store/c128_store.hpp"
#include "dsv4/c128_store/c128_store_params.h"
#include "dsv4/compressor/reference.hpp"

namespace zerojit::dsv4::reference {

// Both throw std::invalid_argument (naming the kernel and the argument) for a configuration the
// launcher must reject: a non-positive block size, and for c128_store a page stride below
// B_k * 584. The key's norm_weight_dtype selects how rms_norm_weight is read.

// Spec 6: pages of key.kv_cache_block_size rows, key.kv_block_stride bytes apart. Returns the
// kv slots written.
std::vector<long long> c128_store(const C128StoreKey& key, const zj::dsv4::C128StoreParams& params);
// Spec 7: bf16 rows, or e4m3 rows when key.store_full_fp8. Returns the kv slots written.
std::vector<long long> c128_store_full(const C128StoreFullKey& key,
                                       const zj::dsv4::C128StoreFullParams& params);

}  // namespace zerojit::dsv4::reference

// CPU references of the C4 compressor stores (spec sections 3 and 4), for the kernel compiled
// for a key: the fp8_ds_mla store (C4StoreKernel) and the full-row store (C4StoreFullKernel).
// The stages and comparisons they share with the other compressor kernels are
// compressor/reference.hpp.
#pragma once

#include <vector>

#include "dsv4/c4_store/c4_store.hpp"
#include "dsv4/c4_store/c4_store_params.h"
#include "dsv4/compressor/reference.hpp"

namespace zerojit::dsv4::reference {

// Both throw std::invalid_argument (naming the kernel and the argument) for a configuration the
// launcher must reject: non-positive block sizes, and for c4_store a page stride below
// B * 584. The key's norm_weight_dtype selects how rms_norm_weight is read.

// Spec 3. Returns the kv slots written.
std::vector<long long> c4_store(const C4StoreKey& key, const zj::dsv4::C4StoreParams& params);
// Spec 4: bf16 rows, or e4m3 rows when key.store_full_fp8. Returns the kv slots written.
std::vector<long long> c4_store_full(const C4StoreFullKey& key,
                                     const zj::dsv4::C4StoreFullParams& params);

}  // namespace zerojit::dsv4::reference

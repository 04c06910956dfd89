// The fp8_ds_mla page geometry (spec §0.4) and the compress ratios a DSv4 layer can have.
#pragma once

#include <cstdint>

namespace zerojit::dsv4 {

inline constexpr std::int64_t kDsMlaTokenDataBytes = 576;  // 448 E4M3 + 64 BF16
inline constexpr std::int64_t kDsMlaScaleBytes = 8;        // 7 UE8M0 + 1 pad
inline constexpr std::int64_t kDsMlaRowBytes = kDsMlaTokenDataBytes + kDsMlaScaleBytes;  // 584
inline constexpr std::int64_t kDsMlaPageAlignment = 576;  // vLLM's cache_alignment
// The dequant-gather kernel copies pages with 32-byte cp.async, so a page stride must keep
// every page 32-byte aligned (spec §2).
inline constexpr std::int64_t kDsMlaPageStrideGranule = 32;

// The compress ratios a DSv4 layer can have: 0 = sliding window only, 4 = CSA (compressed
// sparse attention, owns the Lightning Indexer), 128 = HCA (heavily compressed attention).
inline constexpr int kSlidingWindowOnlyRatio = 0;
inline constexpr int kCsaCompressRatio = 4;
inline constexpr int kHcaCompressRatio = 128;

// Rows per page of a compressed cache: max(1, block_size / compress_ratio) (spec §0.4).
// Throws std::invalid_argument unless compress_ratio > 0 and block_size >= 0.
int compressed_block_size(int block_size, int compress_ratio);

// round_up(rows_per_page * 584, 576): vLLM's default fp8_ds_mla page stride (spec §0.4).
// Throws std::invalid_argument unless rows_per_page >= 1.
std::int64_t default_ds_mla_page_stride_bytes(int rows_per_page);

}  // namespace zerojit::dsv4

// The whole DCP exchange (spec section 12.9) on one GPU and across two: pack every rank's local
// top-k, gather the candidates rank-major, select, and compare with the exact top-k of the
// unsharded logits; the gathered buffer must also hold the reference pack's bytes. The harness
// is dsv4/support/gpu_harness.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "dsv4/dcp_pack/reference.hpp"
#include "dsv4/support/gpu_harness.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::gpu_test;

struct ExchangeCase {
  std::string name;
  int world_size = 2;
  int interleave = 1;
  bool has_row_starts = false;
  int topk = 512;
  std::int64_t rows = 9;
  std::int64_t global_width = 5000;
  std::uint64_t seed = 1;
};

// The primary context of `device` (made current on the way; callers set the one they need).
cuda::Context primary_context(int device) {
  cuda::make_device_current(device);
  cuda::Context context = nullptr;
  cuda::check(cuda::driver().cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  return context;
}

// Packs every rank's candidates and gathers them into one [R, W * K, 2] buffer on device 0.
// With `devices` > 1, rank r runs on device r % devices with its inputs there, packs into a
// buffer of its own device, and its rows reach device 0 by device-to-device copies (the
// all-gather of a real DCP group); with 1, every rank packs straight into its slice.
std::string check_exchange(const ExchangeCase& c, int devices = 1) {
  const std::string label = case_label(
      "dsv4.dcp_pack exchange", c.name + " (W=" + std::to_string(c.world_size) +
                                    ", I=" + std::to_string(c.interleave) + ", topk " +
                                    std::to_string(c.topk) + ", R=" + std::to_string(c.rows) +
                                    ", global width " + std::to_string(c.global_width) + ")");
  in::Random random(c.seed);
  const std::int64_t rows = c.rows;
  const std::int64_t k = c.topk;
  const int w = c.world_size;
  // The unsharded logits.
  std::vector<float> global(static_cast<std::size_t>(rows * c.global_width));
  for (float& value : global) value = in::random_logit(random, 0.03, 0.01);
  const std::vector<std::int32_t> exact =
      ref::dcp_exact_topk(global.data(), rows, c.global_width, c.global_width, c.topk);

  // Every rank packs into its slice of one gathered buffer [R, W * K, 2].
  in::HostTensor gathered = in::make_tensor(DType::f32, {rows, w * k, 2});
  in::HostTensor reference_gathered = gathered;
  std::deque<Placement> placements(static_cast<std::size_t>(devices));  // one per device
  if (devices > 1) cuda::make_device_current(0);
  const TensorRef gathered_ref = placements[0].put(gathered);
  std::deque<in::HostTensor> keep_alive;  // stable addresses: Placement remembers them
  struct RankOutput {
    int device;
    const float* packed;  // [R, K, 2] contiguous, on `device`
  };
  std::vector<RankOutput> rank_outputs;
  for (int rank = 0; rank < w; ++rank) {
    const int rank_device = rank % devices;
    if (devices > 1) cuda::make_device_current(rank_device);
    Placement& device = placements[static_cast<std::size_t>(rank_device)];
    const std::int64_t local_width = ref::dcp_local_width(c.global_width, rank, w, c.interleave);
    std::vector<std::int32_t> starts(static_cast<std::size_t>(rows), 0);
    if (c.has_row_starts) {
      for (auto& s : starts) s = static_cast<std::int32_t>(random.uniform_int(0, 30));
    }
    std::int64_t widest = 0;
    for (std::int32_t s : starts) widest = std::max<std::int64_t>(widest, s);
    const std::int64_t width = local_width == 0 ? 0 : local_width + widest;
    in::HostTensor& logits = keep_alive.emplace_back(in::make_tensor(DType::f32, {rows, width}));
    in::HostTensor& indices = keep_alive.emplace_back(in::make_tensor(DType::i32, {rows, k}));
    in::HostTensor& row_starts =
        keep_alive.emplace_back(in::tensor_of(std::span<const std::int32_t>(starts)));
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t start = starts[static_cast<std::size_t>(r)];
      for (std::int64_t col = 0; col < width; ++col) {
        // Columns before the row start belong to another row of the chunk: noise.
        const std::int64_t l = col - start;
        const float value =
            l >= 0 && l < local_width
                ? global[static_cast<std::size_t>(
                      r * c.global_width + ref::dcp_global_position(rank, l, w, c.interleave))]
                : in::random_logit(random, 0.0, 0.0);
        logits.set<float>(r * width + col, value);
      }
      // The rank's local top-k over its own positions (ids = local positions, -1 padded).
      const std::vector<std::int32_t> local = ref::dcp_exact_topk(
          logits.as<float>() + r * width + start, 1, width, local_width, c.topk);
      for (std::int64_t col = 0; col < k; ++col) {
        indices.set<std::int32_t>(r * k + col, local[static_cast<std::size_t>(col)]);
      }
    }
    // This rank's view of the gathered buffer: [R, K, 2] at column rank * K.
    const TensorDesc slice = TensorDesc::strided(DType::f32, std::vector<std::int64_t>{rows, k, 2},
                                                 std::vector<std::int64_t>{w * k * 2, 2, 1});
    params::DcpPackParams p{};
    p.logits = logits.as<float>();
    p.logits_stride_row = width;
    p.logits_stride_col = 1;
    p.num_cols = width;
    p.topk_indices = indices.as<int>();
    p.topk_indices_stride_row = k;
    p.topk_indices_stride_col = 1;
    p.row_starts = c.has_row_starts ? row_starts.as<int>() : nullptr;
    p.packed = reference_gathered.as<float>() + rank * k * 2;
    p.packed_stride_row = w * k * 2;
    p.packed_stride_col = 2;
    p.packed_stride_pair = 1;
    p.num_rows = rows;
    p.rank = rank;
    ref::dcp_pack(zerojit::dsv4::DcpPackKey{c.topk, c.has_row_starts, w, c.interleave}, p);

    DcpPackArgs args;
    args.logits = device.put(logits);
    args.topk_indices = device.put(indices);
    if (c.has_row_starts) args.row_starts = device.put(row_starts);
    if (devices == 1) {
      args.packed = TensorRef{slice, static_cast<float*>(gathered_ref.data) + rank * k * 2};
      args.packed.desc.alignment = pointer_alignment(args.packed.data);
    } else {
      const in::HostTensor& local =
          keep_alive.emplace_back(in::make_tensor(DType::f32, {rows, k, 2}));
      args.packed = device.put(local);
      rank_outputs.push_back({rank_device, args.packed.as<const float>()});
    }
    for (TensorRef* ref : {&args.logits, &args.topk_indices, &args.packed}) {
      ref->desc.device = Device::cuda(rank_device);
    }
    if (c.has_row_starts) args.row_starts->desc.device = Device::cuda(rank_device);
    args.dcp_rank = rank;
    args.dcp_world_size = w;
    args.cp_interleave = c.interleave;
    try {
      DcpPackKernel::instance()(args);
    } catch (const std::exception& error) {
      return label + ": the call of rank " + std::to_string(rank) + " failed: " + error.what();
    }
  }
  try {
    for (int d = devices - 1; d >= 0; --d) {
      if (devices > 1) cuda::make_device_current(d);
      finish();
    }
    // The all-gather: each rank's rows into its column range of device 0's buffer, copied
    // device to device (cuMemcpyPeer: the documented copy between two devices' contexts).
    const std::size_t row_bytes = static_cast<std::size_t>(k) * 2 * sizeof(float);
    for (std::size_t rank = 0; rank < rank_outputs.size(); ++rank) {
      const cuda::DriverApi& api = cuda::driver();
      if (api.cuMemcpyPeer == nullptr) return label + ": the driver lacks cuMemcpyPeer";
      const int source_device = rank_outputs[rank].device;
      const cuda::Context source_context = primary_context(source_device);
      const cuda::Context destination_context = primary_context(0);
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* source = rank_outputs[rank].packed + r * k * 2;
        float* destination = static_cast<float*>(gathered_ref.data) + r * w * k * 2 +
                             static_cast<std::int64_t>(rank) * k * 2;
        cuda::check(
            api.cuMemcpyPeer(reinterpret_cast<cuda::DevicePtr>(destination), destination_context,
                             reinterpret_cast<cuda::DevicePtr>(source), source_context, row_bytes),
            "cuMemcpyPeer (device " + std::to_string(source_device) + " -> device 0)");
      }
    }
    if (!rank_outputs.empty()) cuda::make_device_current(0);
    finish();
  } catch (const std::exception& error) {
    return label + ": the calls failed: " + error.what();
  }
  const std::vector<std::uint8_t> actual = placements[0].get(gathered);
  const std::int64_t origin = gathered.offset_bytes;
  const std::vector<std::int32_t> selected = ref::dcp_select_global_topk(
      reinterpret_cast<const float*>(actual.data() + origin), rows, w * k, c.topk);
  const std::vector<std::int32_t> reference_selected =
      ref::dcp_select_global_topk(reference_gathered.as<float>(), rows, w * k, c.topk);
  const bool reference_exact = reference_selected == exact;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t i = 0; i < k; ++i) {
      const std::int32_t want = exact[static_cast<std::size_t>(r * k + i)];
      const std::int32_t got = selected[static_cast<std::size_t>(r * k + i)];
      if (want == got) continue;
      auto score = [&](std::int32_t id) {
        return id < 0 ? std::string("none")
                      : std::to_string(global[static_cast<std::size_t>(r * c.global_width + id)]);
      };
      return label + ": row " + std::to_string(r) + ", rank-ordered position " + std::to_string(i) +
             " of the selected top-k: expected global id " + std::to_string(want) + " (score " +
             score(want) + "), actual " + std::to_string(got) + " (score " + score(got) + ")" +
             (reference_exact ? "; the CPU reference pack gives the exact top-k, the kernel's "
                                "packed candidates do not"
                              : "; the CPU reference pack does not give it either: the test's "
                                "sharding or selection is wrong");
    }
  }
  // The exchange also leaves every byte of the gathered buffer as the reference packs it.
  std::string failures;
  append_failure(failures, label, "gathered candidates",
                 compare_tensor(reference_gathered, actual, {"row", "candidate", "pair"}));
  return failures;
}

// Compiles the DCP pack keys of the cases (a launch then only loads them).
void precompile_exchange_keys(const std::vector<ExchangeCase>& cases) {
  std::vector<DcpPackKey> keys;
  for (const ExchangeCase& c : cases) {
    keys.push_back({c.topk, c.has_row_starts, c.world_size, c.interleave});
  }
  precompile(DcpPackKernel::instance(), keys);
}

TEST_F(Dsv4Gpu, DcpExchangeOnOneGpuGivesTheExactGlobalTopK) {
  const std::vector<ExchangeCase> cases = {
      {"decode", 2, 1, false, 512, 9, 5000, 81},
      {"prefill chunk with row starts", 4, 2, true, 512, 6, 7000, 82},
      {"interleave 64", 8, 64, false, 512, 4, 9000, 83},
      {"most ranks own nothing (3 positions over 8 ranks)", 8, 1, false, 512, 3, 3, 84},
      {"fewer positions than top-k (-1 padding)", 4, 1, true, 1024, 5, 700, 85},
      {"V4-Pro top-k", 2, 2, false, 1024, 7, 6000, 86},
  };
  precompile_exchange_keys(cases);
  for (const ExchangeCase& c : cases) EXPECT_NO_FAILURE(check_exchange(c));
}

// Real DCP ranks live on different GPUs: the same exchange with rank r on device r % 2 and the
// gathered buffer on device 0 (skipped with fewer than two devices).
TEST_F(Dsv4Gpu, DcpExchangeAcrossTwoGpusGivesTheExactGlobalTopK) {
  if (dry_run() || cuda::device_count() < 2) {
    GTEST_SKIP() << "needs two CUDA devices, " << (dry_run() ? 0 : cuda::device_count())
                 << " visible";
  }
  const std::vector<ExchangeCase> cases = {
      {"decode, one rank per GPU", 2, 1, false, 512, 9, 5000, 91},
      {"prefill chunk with row starts, two ranks per GPU", 4, 2, true, 512, 6, 7000, 92},
      {"V4-Pro top-k, interleave 64", 2, 64, false, 1024, 7, 6000, 93},
  };
  precompile_exchange_keys(cases);  // each device loads its modules at first use
  for (const ExchangeCase& c : cases) EXPECT_NO_FAILURE(check_exchange(c, 2));
  cuda::make_device_current(0);
}

}  // namespace
}  // namespace zerojit::dsv4

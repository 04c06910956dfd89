// The DSv4 kernels on a GPU (label gpu), each against its CPU reference on fresh random inputs
// at several sizes (1 token, sizes that are no multiple of a block, >= 16k tokens):
//  * bit-exact where spec sections 10 and 11 say so: dequant-gather (all bytes), indexer-Q
//    (codes, scales, weights; MXFP4 included, software E2M1 on sm_90), DCP pack (all bytes);
//  * within the spec's tolerances for the compressors (the reference's comparison helpers),
//    whose scale bytes and pad byte still compare exactly;
//  * outputs are poisoned with 0xA5 first, and every byte a kernel must not write (guards,
//    padding, other rows, inactive tokens, other pages, bytes past B * 584 of a page) must still
//    hold it afterwards.
// Then the whole DCP exchange on one GPU (pack per rank, concatenate, select == exact global
// top-k), and two serving-like batteries after warmup, under the monitor in error mode, that
// must compile and load nothing: the serving battery (kernels/dsv4/battery.hpp) on the default
// manifest, and a compact one written here on the default manifest plus DCP.
//
// Every failure names the kernel, the case, the output, the element (and for gathers the source
// page, code and exponent), the expected and the actual value.
//
// Without a GPU every test skips, saying why. ZEROJIT_DSV4_GPU_DRY_RUN=1 runs the suite without
// one instead: tensors stay in host memory, the kernels still compile with NVRTC, and a backend
// that runs the CPU references stands in for the driver. The comparisons then hold trivially;
// a dry run checks the suite itself (valid inputs, expectations computed, nothing crashes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4/battery/battery.hpp"
#include "dsv4/compressor/reference.hpp"
#include "dsv4/dcp_pack/reference.hpp"
#include "dsv4/dequant_gather/reference.hpp"
#include "dsv4/family.hpp"
#include "dsv4/indexer_q/reference.hpp"
#include "support/dsv4_inputs.hpp"
#include "support/gpu.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::dsv4 {
namespace {

namespace in = zerojit::dsv4::testing;
namespace ref = zerojit::dsv4::reference;
namespace params = zj::dsv4;

bool dry_run() {
  const char* value = std::getenv("ZEROJIT_DSV4_GPU_DRY_RUN");
  return value != nullptr && std::string_view(value) == "1";
}

// ================================================================================================
// Where a case's tensors live: device memory, or (dry run) aligned host memory.
// ================================================================================================

class Placement {
 public:
  // A copy of the tensor's whole allocation (guards and padding included) on the device under
  // test; returns the ref of its element 0.
  TensorRef put(const in::HostTensor& tensor) {
    Allocation allocation;
    allocation.source = &tensor;
    std::uint8_t* base = nullptr;
    if (dry_run()) {
      constexpr std::size_t kAlignment = 256;  // what cuMemAlloc gives
      allocation.host.assign(tensor.bytes.size() + kAlignment, 0);
      const auto address = reinterpret_cast<std::uintptr_t>(allocation.host.data());
      allocation.host_offset = (kAlignment - address % kAlignment) % kAlignment;
      base = allocation.host.data() + allocation.host_offset;
      std::memcpy(base, tensor.bytes.data(), tensor.bytes.size());
    } else {
      allocation.device = std::make_unique<zerojit::testing::DeviceBuffer>(tensor.bytes);
      base = static_cast<std::uint8_t*>(allocation.device->get());
    }
    allocations_.push_back(std::move(allocation));
    return make_tensor_ref(base + tensor.offset_bytes, tensor.desc);
  }

  // The allocation put(tensor) made, read back whole (after the device finished).
  std::vector<std::uint8_t> get(const in::HostTensor& tensor) const {
    for (const Allocation& allocation : allocations_) {
      if (allocation.source != &tensor) continue;
      if (allocation.device) return allocation.device->download<std::uint8_t>();
      const auto begin =
          allocation.host.begin() + static_cast<std::ptrdiff_t>(allocation.host_offset);
      return {begin, begin + static_cast<std::ptrdiff_t>(tensor.bytes.size())};
    }
    throw std::logic_error("Placement::get: the tensor was never put");
  }

 private:
  struct Allocation {
    const in::HostTensor* source = nullptr;
    std::unique_ptr<zerojit::testing::DeviceBuffer> device;
    std::vector<std::uint8_t> host;
    std::size_t host_offset = 0;
  };
  std::vector<Allocation> allocations_;
};

// Waits for the device; an asynchronous kernel fault surfaces here as a CudaError.
void finish() {
  if (!dry_run()) zerojit::testing::synchronize();
}

// ================================================================================================
// The dry run's backend: "launching" runs the CPU reference on the packed argument block.
// ================================================================================================

std::map<std::string, std::string> parse_key_text(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(", ", start);
    if (end == std::string::npos) end = text.size();
    const std::string field = text.substr(start, end - start);
    const std::size_t equals = field.find('=');
    if (equals != std::string::npos) fields[field.substr(0, equals)] = field.substr(equals + 1);
    start = end + 2;
  }
  return fields;
}

template <class Params>
Params unpack(const KernelArgs& args) {
  if (args.count() != 1 || args.size(0) != sizeof(Params)) {
    throw std::logic_error("reference backend: the launch does not carry one argument block of " +
                           std::to_string(sizeof(Params)) + " bytes");
  }
  Params block;
  std::memcpy(&block, args.data(0), sizeof block);
  return block;
}

class ReferenceBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu-reference (dry run)"; }
  int device_count() override { return 1; }
  std::string target_arch(int) override { return "sm_90a"; }
  LoadedFunction load(const CompiledArtifact& artifact, std::string_view, int device) override {
    loaded_.push_back({artifact.kernel_name, artifact.key_text});
    LoadedFunction function;
    function.function = reinterpret_cast<cuda::Function>(loaded_.size());
    function.device = device;
    return function;
  }
  bool is_capturing(cuda::Stream) override { return false; }
  void launch(const LoadedFunction& function, const LaunchGeometry&, const KernelArgs& args,
              cuda::Stream) override {
    if (!execute) return;
    const Loaded& entry = loaded_.at(reinterpret_cast<std::size_t>(function.function) - 1);
    run(entry.kernel, parse_key_text(entry.key), args);
  }

  bool execute = true;  // false: record nothing, run nothing (the battery only counts compiles)

 private:
  struct Loaded {
    std::string kernel;
    std::string key;
  };

  static ref::NormWeightType norm(const std::map<std::string, std::string>& key) {
    return key.at("norm_weight_dtype") == "f32" ? ref::NormWeightType::kFloat32
                                                : ref::NormWeightType::kBFloat16;
  }

  static void run(const std::string& kernel, const std::map<std::string, std::string>& key,
                  const KernelArgs& args) {
    if (kernel == "dsv4.indexer_q_fp8" || kernel == "dsv4.indexer_q_mxfp4") {
      const ref::IndexerQShape shape{std::stoi(key.at("head_dim")), std::stoi(key.at("rope_dim")),
                                     std::stoi(key.at("num_heads")),
                                     key.at("cos_sin_dtype") == "bf16"};
      const auto block = unpack<params::IndexerQParams>(args);
      if (kernel == "dsv4.indexer_q_fp8") {
        ref::indexer_q_fp8(block, shape);
      } else {
        ref::indexer_q_mxfp4(block, shape);
      }
    } else if (kernel == "dsv4.dequant_gather") {
      ref::dequant_gather(unpack<params::DequantGatherParams>(args),
                          std::stoi(key.at("block_size")), key.at("has_gather_lens") == "true");
    } else if (kernel == "dsv4.c4_store") {
      ref::c4_store(unpack<params::C4StoreParams>(args), {norm(key)});
    } else if (kernel == "dsv4.c4_store_full") {
      ref::c4_store_full(unpack<params::C4StoreFullParams>(args),
                         {key.at("store_full_fp8") == "true", norm(key)});
    } else if (kernel == "dsv4.c128_compress") {
      ref::c128_compress(unpack<params::C128CompressParams>(args),
                         {std::stoi(key.at("head_size"))});
    } else if (kernel == "dsv4.c128_store") {
      ref::c128_store(unpack<params::C128StoreParams>(args),
                      {std::stoll(key.at("kv_cache_block_size")),
                       std::stoll(key.at("kv_block_stride")), norm(key)});
    } else if (kernel == "dsv4.c128_store_full") {
      ref::c128_store_full(unpack<params::C128StoreFullParams>(args),
                           {key.at("store_full_fp8") == "true", norm(key)});
    } else if (kernel == "dsv4.dcp_pack") {
      ref::dcp_pack(unpack<params::DcpPackParams>(args),
                    {std::stoi(key.at("topk")), key.at("has_row_starts") == "true",
                     std::stoi(key.at("dcp_world_size")), std::stoi(key.at("cp_interleave"))});
    } else {
      throw std::logic_error("reference backend: no reference for kernel " + kernel);
    }
  }

  std::vector<Loaded> loaded_;
};

// ================================================================================================
// Fixture and helpers
// ================================================================================================

class Dsv4Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dry_run()) {
      previous_store_ = Runtime::instance().artifact_store();
      reference_backend_ = std::make_shared<ReferenceBackend>();
      Runtime::instance().set_backend(reference_backend_);
      Runtime::instance().set_artifact_store(nullptr);
    } else {
      ZEROJIT_REQUIRE_GPU();
    }
    Monitor::instance().disarm();
    Monitor::instance().set_mode(MonitorMode::off);
    Monitor::instance().reset_events();
  }

  void TearDown() override {
    Monitor::instance().disarm();
    Monitor::instance().set_mode(MonitorMode::off);
    if (reference_backend_) {
      for (KernelBase* kernel : all_kernels()) kernel->reset_for_testing();
      Runtime::instance().set_backend(make_cuda_backend());
      Runtime::instance().set_artifact_store(previous_store_);
    }
  }

  std::shared_ptr<ReferenceBackend> reference_backend_;  // dry run only

 private:
  std::shared_ptr<ArtifactStore> previous_store_;
};

// A check returns its failures as text (empty: passed); each names kernel, case, output,
// element, expected and actual.
#define EXPECT_NO_FAILURE(expression)                           \
  do {                                                          \
    const std::string failure_text_ = (expression);             \
    if (!failure_text_.empty()) ADD_FAILURE() << failure_text_; \
  } while (0)

// Compiles the keys a test is about to use, all at once (one NVRTC job per core), so that a
// test with many keys does not compile them one launch at a time. Compile errors fail the test
// naming kernel and key.
template <class Kernel>
void precompile(Kernel& kernel, std::vector<typename Kernel::Key> keys) {
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  const std::string arch = Runtime::instance().target_arch(0);
  for (const auto& outcome : kernel.compile_many(keys, arch, 0)) {
    EXPECT_TRUE(outcome.error.empty())
        << kernel.name() << " [" << describe(outcome.key) << "] does not compile for " << arch
        << ": " << outcome.error;
  }
}

// "kernel case 'name'": the prefix of every failure.
std::string case_label(std::string_view kernel, std::string_view name) {
  return std::string(kernel) + " case '" + std::string(name) + "'";
}

void append_failure(std::string& failures, const std::string& label, std::string_view output,
                    const std::string& failure) {
  if (failure.empty()) return;
  failures +=
      (failures.empty() ? "" : "\n") + label + ", output " + std::string(output) + ": " + failure;
}

// Whole allocations compared byte for byte, reporting elements with their values.
std::string compare_tensor(const in::HostTensor& expected, const std::vector<std::uint8_t>& actual,
                           std::vector<std::string> names) {
  return in::compare_bytes(expected.bytes, actual,
                           in::element_locator(expected, std::move(names), expected.bytes, actual));
}

std::span<const float> float_view(const std::vector<std::uint8_t>& bytes, std::int64_t offset,
                                  std::int64_t count) {
  return {reinterpret_cast<const float*>(bytes.data() + offset), static_cast<std::size_t>(count)};
}

// ================================================================================================
// Indexer-Q (spec section 1): codes, scale bytes and weights bit-exact.
// ================================================================================================

struct IndexerCase {
  std::string name;
  std::int64_t tokens = 1;
  DType cos_sin_dtype = DType::f32;
  std::int64_t cos_sin_row_stride = 64;
  std::int64_t max_position = 4096;
  std::uint64_t seed = 1;
  // DSv4 rotates 64 of the 128 dims (lanes 4..7 of a row); with 32, only lanes 6 and 7 do.
  int rope_dim = 64;
};

constexpr int kIndexerHeads = 64;
constexpr int kIndexerDim = 128;

IndexerQKey indexer_key(const IndexerCase& c) {
  return {kIndexerDim, c.rope_dim, kIndexerHeads, c.cos_sin_dtype, c.tokens < 512 ? 1 : 4};
}

std::string check_indexer_q(const IndexerCase& c, bool mxfp4) {
  const std::string label = case_label(mxfp4 ? "dsv4.indexer_q_mxfp4" : "dsv4.indexer_q_fp8",
                                       c.name + ", T=" + std::to_string(c.tokens));
  in::Random random(c.seed);
  const std::int64_t tokens = c.tokens;
  const in::IndexerQInputsHost inputs =
      in::make_indexer_q_inputs(random, tokens, kIndexerHeads, kIndexerDim, c.rope_dim,
                                c.cos_sin_dtype, c.cos_sin_row_stride, c.max_position);
  // q_fp8 as e4m3 (the owner takes u8 or e4m3), so that failures print code values.
  const in::HostTensor codes =
      mxfp4 ? in::make_tensor(DType::u8, {tokens, kIndexerHeads, kIndexerDim / 2})
            : in::make_tensor(DType::e4m3, {tokens, kIndexerHeads, kIndexerDim});
  const in::HostTensor scales =
      in::make_tensor(DType::u8, {tokens, kIndexerHeads, kIndexerDim / 32});
  const in::HostTensor weights_out = in::make_tensor(DType::f32, {tokens, kIndexerHeads});

  // The reference writes into copies of the poisoned outputs.
  in::HostTensor expected_codes = codes;
  in::HostTensor expected_scales = scales;
  in::HostTensor expected_weights = weights_out;
  params::IndexerQParams p{};
  p.positions = inputs.positions.as<long long>();
  p.q = inputs.q.as<unsigned short>();
  p.cos_sin_cache = inputs.cos_sin_cache.data();
  p.cos_sin_row_stride = c.cos_sin_row_stride;
  p.weights = inputs.weights.as<unsigned short>();
  p.weights_out = expected_weights.as<float>();
  p.num_tokens = tokens;
  p.scale = inputs.scale;
  const ref::IndexerQShape shape{kIndexerDim, c.rope_dim, kIndexerHeads,
                                 c.cos_sin_dtype == DType::bf16};
  if (mxfp4) {
    p.q_packed = expected_codes.as<unsigned char>();
    p.q_scale = expected_scales.as<unsigned char>();
  } else {
    p.q_fp8 = expected_codes.as<unsigned char>();
  }
  // Tokens are independent: the reference runs on chunks of them in parallel.
  constexpr std::int64_t kTokensPerChunk = 512;
  const std::int64_t chunks = (tokens + kTokensPerChunk - 1) / kTokensPerChunk;
  std::vector<std::string> errors(static_cast<std::size_t>(chunks));
  parallel_for(static_cast<std::size_t>(chunks), 0, [&](std::size_t chunk) {
    const std::int64_t first = static_cast<std::int64_t>(chunk) * kTokensPerChunk;
    const std::int64_t row = first * kIndexerHeads;
    params::IndexerQParams part = p;
    part.positions += first;
    part.q += row * kIndexerDim;
    part.weights += row;
    part.weights_out += row;
    part.num_tokens = std::min(kTokensPerChunk, tokens - first);
    try {
      if (mxfp4) {
        part.q_packed += row * kIndexerDim / 2;
        part.q_scale += row * kIndexerDim / 32;
        ref::indexer_q_mxfp4(part, shape);
      } else {
        part.q_fp8 += row * kIndexerDim;
        ref::indexer_q_fp8(part, shape);
      }
    } catch (const std::exception& error) {
      errors[chunk] = error.what();
    }
  });
  for (const std::string& error : errors) {
    if (!error.empty()) return label + ": the reference refused the inputs: " + error;
  }

  Placement device;
  const IndexerQInputs args{device.put(inputs.positions), device.put(inputs.q),
                            device.put(inputs.cos_sin_cache), device.put(inputs.weights),
                            inputs.scale};
  try {
    if (mxfp4) {
      IndexerQMxFp4Kernel::instance()(
          args, {device.put(codes), device.put(scales), device.put(weights_out)});
    } else {
      IndexerQFp8Kernel::instance()(args, {device.put(codes), device.put(weights_out)});
    }
    finish();
  } catch (const std::exception& error) {
    return label + ": the call failed: " + error.what();
  }
  std::string failures;
  if (mxfp4) {
    append_failure(failures, label, "q_packed (element 2k in the low nibble)",
                   compare_tensor(expected_codes, device.get(codes), {"token", "head", "byte"}));
    append_failure(failures, label, "q_scale (UE8M0 per 32 elements)",
                   compare_tensor(expected_scales, device.get(scales), {"token", "head", "block"}));
  } else {
    append_failure(failures, label, "q_fp8 (e4m3 codes)",
                   compare_tensor(expected_codes, device.get(codes), {"token", "head", "dim"}));
  }
  append_failure(failures, label, "weights_out",
                 compare_tensor(expected_weights, device.get(weights_out), {"token", "head"}));
  return failures;
}

std::vector<IndexerCase> indexer_cases() {
  return {
      {"one token", 1, DType::f32, 64, 4096, 11},
      {"bf16 cos/sin with padded rows, 37 tokens", 37, DType::bf16, 72, 4096, 12},
      {"coarsen 4, 600 tokens (no multiple of a CTA's tokens), padded f32 cos/sin rows", 600,
       DType::f32, 80, 70000, 13},
      {"coarsen 4 with bf16 cos/sin, 513 tokens", 513, DType::bf16, 64, 4096, 14},
      {"16384 tokens", 16384, DType::f32, 64, 65536, 15},
      {"rope_dim 32, coarsen 4, 700 tokens", 700, DType::f32, 32, 4096, 16, 32},
      {"rope_dim 32, bf16 cos/sin with padded rows, 45 tokens", 45, DType::bf16, 40, 4096, 17, 32},
  };
}

TEST_F(Dsv4Gpu, IndexerQFp8MatchesTheReferenceBitExactly) {
  std::vector<IndexerQKey> keys;
  for (const IndexerCase& c : indexer_cases()) keys.push_back(indexer_key(c));
  precompile(IndexerQFp8Kernel::instance(), keys);
  for (const IndexerCase& c : indexer_cases()) EXPECT_NO_FAILURE(check_indexer_q(c, false));
}

TEST_F(Dsv4Gpu, IndexerQMxFp4MatchesTheReferenceBitExactly) {
  // On sm_90 the E2M1 conversion is software (round half to even on the code); on sm_100 it is
  // the hardware instruction. Both must give the reference's bytes, ties included.
  std::vector<IndexerQKey> keys;
  for (const IndexerCase& c : indexer_cases()) keys.push_back(indexer_key(c));
  precompile(IndexerQMxFp4Kernel::instance(), keys);
  for (const IndexerCase& c : indexer_cases()) EXPECT_NO_FAILURE(check_indexer_q(c, true));
}

// ================================================================================================
// Dequantize + gather (spec section 2): every byte of `out` bit-exact.
// ================================================================================================

struct GatherInputs {
  in::HostTensor cache;  // [pages, B, 584]
  in::HostTensor block_table;
  in::HostTensor seq_lens;
  in::HostTensor gather_lens;  // empty desc when the call has none
  std::int64_t page_stride = 0;
  std::int64_t width = 0;
};

struct GatherCase {
  std::string name;
  int block_size = 64;
  bool has_gather_lens = false;
  std::vector<std::int32_t> seq_lens;
  std::vector<std::int32_t> gather_lens;  // when has_gather_lens
  std::int64_t offset = 0;
  std::int64_t rows_out = -1;            // M; -1: offset + the largest gather length
  std::int64_t out_row_stride = 512;     // elements
  std::int64_t out_request_padding = 0;  // elements between requests past M rows
  std::int64_t page_stride = 0;          // bytes; 0: round_up(B * 584, 576)
  std::int64_t extra_pages = 3;          // pages no request uses
  int holes = 0;                         // block-table entries in use set to -1 (skipped rows)
  int exponent_low = 100;                // UE8M0 exponents of the cache
  int exponent_high = 140;
  std::uint64_t seed = 1;
};

// The cache, block table and lengths of one gather call: the pages each request reads are
// distinct, permuted, and filled with valid fp8_ds_mla rows.
GatherInputs make_gather_inputs(in::Random& random, const GatherCase& c) {
  GatherInputs result;
  const auto requests = static_cast<std::int64_t>(c.seq_lens.size());
  std::vector<std::int64_t> first_column, last_column;
  std::int64_t used = 0;
  for (std::int64_t r = 0; r < requests; ++r) {
    const std::int64_t length = c.seq_lens[static_cast<std::size_t>(r)];
    const std::int64_t gathered =
        c.has_gather_lens ? c.gather_lens[static_cast<std::size_t>(r)] : length;
    const std::int64_t first = std::max<std::int64_t>(0, length - gathered);
    if (gathered <= 0 || length <= 0) {
      first_column.push_back(0);
      last_column.push_back(-1);
      continue;
    }
    first_column.push_back(first / c.block_size);
    last_column.push_back((length - 1) / c.block_size);
    used += last_column.back() - first_column.back() + 1;
  }
  result.width = 2;
  for (std::int64_t last : last_column) result.width = std::max(result.width, last + 3);
  const std::int64_t pages = used + c.extra_pages;
  result.block_table =
      in::permuted_block_table(random, result.width, first_column, last_column, pages);
  for (std::int64_t hole = 0; hole < std::min<std::int64_t>(c.holes, used); ++hole) {
    // A used entry, found by walking the table from a random start.
    std::int64_t index = random.uniform_int(0, requests * result.width - 1);
    while (result.block_table.get<std::int32_t>(index) < 0)
      index = (index + 1) % (requests * result.width);
    result.block_table.set<std::int32_t>(index, -1);
  }
  result.page_stride = c.page_stride > 0 ? c.page_stride : in::default_page_stride(c.block_size);
  result.cache = in::make_ds_mla_cache(pages, c.block_size, result.page_stride);
  in::fill_ds_mla_cache(random, result.cache, c.exponent_low, c.exponent_high);
  result.seq_lens = in::tensor_of(std::span<const std::int32_t>(c.seq_lens));
  if (c.has_gather_lens)
    result.gather_lens = in::tensor_of(std::span<const std::int32_t>(c.gather_lens));
  return result;
}

// The output workspace [R, M, 512] bf16 of a case, poisoned.
in::HostTensor make_gather_out(const GatherCase& c) {
  std::int64_t rows = c.rows_out;
  if (rows < 0) {
    std::int64_t longest = 0;
    for (std::size_t r = 0; r < c.seq_lens.size(); ++r) {
      longest =
          std::max<std::int64_t>(longest, c.has_gather_lens ? c.gather_lens[r] : c.seq_lens[r]);
    }
    rows = c.offset + longest;
  }
  const auto requests = static_cast<std::int64_t>(c.seq_lens.size());
  return in::make_tensor(DType::bf16, {requests, rows, 512},
                         {rows * c.out_row_stride + c.out_request_padding, c.out_row_stride, 1});
}

// Runs the reference for one call into `expected_out`.
void gather_reference(const GatherCase& c, const GatherInputs& inputs,
                      in::HostTensor& expected_out) {
  params::DequantGatherParams p{};
  p.out = expected_out.as<unsigned short>();
  p.out_req_stride = expected_out.desc.stride(0);
  p.out_row_stride = expected_out.desc.stride(1);
  p.num_rows_out = expected_out.desc.size(1);
  p.k_cache = inputs.cache.as<unsigned char>();
  p.page_stride_bytes = inputs.page_stride;
  p.seq_lens = inputs.seq_lens.as<int>();
  p.gather_lens = c.has_gather_lens ? inputs.gather_lens.as<int>() : nullptr;
  p.block_table = inputs.block_table.as<int>();
  p.block_table_row_stride = inputs.width;
  p.max_blocks = inputs.width;
  p.offset = c.offset;
  p.num_reqs = static_cast<long long>(c.seq_lens.size());
  ref::dequant_gather(p, c.block_size, c.has_gather_lens);
}

DequantGatherArgs gather_args(Placement& device, const GatherCase& c, const GatherInputs& inputs,
                              TensorRef out) {
  DequantGatherArgs args;
  args.out = out;
  args.k_cache = device.put(inputs.cache);
  args.seq_lens = device.put(inputs.seq_lens);
  if (c.has_gather_lens) args.gather_lens = device.put(inputs.gather_lens);
  args.block_table = device.put(inputs.block_table);
  args.offset = c.offset;
  return args;
}

// For a mismatching byte of `out`: where the row came from (position, page, source code and
// exponent), or that the row should not have been written at all.
in::ByteLocator gather_source_locator(const GatherCase& c, const GatherInputs& inputs,
                                      const in::HostTensor& out, in::ByteLocator element) {
  return [&c, &inputs, &out, element = std::move(element)](std::int64_t offset) {
    std::string text = element(offset);
    const std::int64_t relative = offset - out.offset_bytes;
    if (relative < 0) return text;
    const std::int64_t index = relative / 2;
    const std::int64_t r = index / out.desc.stride(0);
    const std::int64_t row = index % out.desc.stride(0) / out.desc.stride(1);
    const std::int64_t dim = index % out.desc.stride(0) % out.desc.stride(1);
    if (r >= out.desc.size(0) || row >= out.desc.size(1) || dim >= 512) return text;
    const std::int64_t length = c.seq_lens[static_cast<std::size_t>(r)];
    const std::int64_t gathered =
        c.has_gather_lens ? c.gather_lens[static_cast<std::size_t>(r)] : length;
    const std::int64_t i = row - c.offset;
    if (i < 0 || i >= gathered) {
      return text + "; this row is outside [offset, offset + G) = [" + std::to_string(c.offset) +
             ", " + std::to_string(c.offset + gathered) + ") and must stay untouched";
    }
    const std::int64_t position = length - gathered + i;
    if (position < 0) return text + "; position " + std::to_string(position) + " < 0 is skipped";
    const std::int64_t page =
        inputs.block_table.get<std::int32_t>(r * inputs.width + position / c.block_size);
    text += "; source: position " + std::to_string(position) + ", page " + std::to_string(page) +
            ", row " + std::to_string(position % c.block_size);
    if (page < 0) return text + " (a -1 page: the row must be skipped)";
    const std::uint8_t* base = inputs.cache.base() + page * inputs.page_stride;
    const std::int64_t row_in_page = position % c.block_size;
    if (dim < 448) {
      text += ", e4m3 code " + in::hex(base[row_in_page * 576 + dim]) + ", exponent " +
              std::to_string(base[c.block_size * 576 + row_in_page * 8 + dim / 64]);
    } else {
      text += ", bf16 tail bytes at " + std::to_string(448 + 2 * (dim - 448));
    }
    return text;
  };
}

std::string check_dequant_gather(const GatherCase& c) {
  const std::string label = case_label("dsv4.dequant_gather", c.name);
  in::Random random(c.seed);
  const GatherInputs inputs = make_gather_inputs(random, c);
  const in::HostTensor out = make_gather_out(c);
  in::HostTensor expected = out;
  gather_reference(c, inputs, expected);
  Placement device;
  try {
    DequantGatherKernel::instance()(gather_args(device, c, inputs, device.put(out)));
    finish();
  } catch (const std::exception& error) {
    return label + ": the call failed: " + error.what();
  }
  const std::vector<std::uint8_t> actual = device.get(out);
  std::string failures;
  append_failure(failures, label, "out",
                 in::compare_bytes(
                     expected.bytes, actual,
                     gather_source_locator(c, inputs, expected,
                                           in::element_locator(expected, {"request", "row", "dim"},
                                                               expected.bytes, actual))));
  return failures;
}

std::vector<GatherCase> gather_cases() {
  std::vector<GatherCase> cases;
  {
    GatherCase c{.name = "one token, sliding-window cache (B=256, gather_lens)",
                 .block_size = 256,
                 .has_gather_lens = true,
                 .seq_lens = {1},
                 .gather_lens = {1},
                 .seed = 21};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "windows of 128 at offset 37, lengths off the block, an empty request",
                 .block_size = 256,
                 .has_gather_lens = true,
                 .seq_lens = {1000, 300, 0, 129, 77},
                 .gather_lens = {128, 128, 0, 128, 77},
                 .offset = 37,
                 .rows_out = 37 + 128 + 3,
                 .seed = 22};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "C4 cache (B=64), padded out rows and requests, wider page stride",
                 .block_size = 64,
                 .seq_lens = {700, 64, 1, 129},
                 .out_row_stride = 520,
                 .out_request_padding = 64,
                 .page_stride = in::default_page_stride(64) + 64,
                 .seed = 23};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "C128 cache (B=2), block-table holes",
                 .block_size = 2,
                 .seq_lens = {1, 2, 3, 255},
                 .holes = 3,
                 .seed = 24};
    cases.push_back(c);
  }
  {
    GatherCase c{.name =
                     "B=16 (block 64's C4 cache), exponents 0..254 (zero factor, bf16 "
                     "subnormals, overflow to inf)",
                 .block_size = 16,
                 .seq_lens = {100, 33},
                 .exponent_low = 0,
                 .exponent_high = 254,
                 .seed = 25};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "out rows end before the gather does (rows past M are skipped)",
                 .block_size = 64,
                 .seq_lens = {300, 90},
                 .offset = 5,
                 .rows_out = 200,
                 .seed = 26};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "gather_lens longer than seq_lens (positions < 0 are skipped)",
                 .block_size = 256,
                 .has_gather_lens = true,
                 .seq_lens = {5, 300},
                 .gather_lens = {9, 128},
                 .seed = 27};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "16596 rows from 4 requests (B=64)",
                 .block_size = 64,
                 .seq_lens = {4500, 4096, 5000, 3000},
                 .extra_pages = 17,
                 .seed = 28};
    cases.push_back(c);
  }
  {
    GatherCase c{.name = "16391 rows with gather_lens (B=256)",
                 .block_size = 256,
                 .has_gather_lens = true,
                 .seq_lens = {8200, 9000},
                 .gather_lens = {8200, 8191},
                 .seed = 29};
    cases.push_back(c);
  }
  return cases;
}

TEST_F(Dsv4Gpu, DequantGatherMatchesTheReferenceBitExactly) {
  std::vector<DequantGatherKey> keys;
  for (const GatherCase& c : gather_cases()) keys.push_back({c.block_size, c.has_gather_lens});
  precompile(DequantGatherKernel::instance(), keys);
  for (const GatherCase& c : gather_cases()) EXPECT_NO_FAILURE(check_dequant_gather(c));
}

TEST_F(Dsv4Gpu, DequantGatherBuildsThePrefillWorkspaceInTwoCalls) {
  // As sparse prefill does: the compressed cache (B=64, seq_lens // 4, no gather_lens) fills
  // rows [0, N), then the sliding-window cache (B=256, the last 128 positions) rows [N, N + 128).
  precompile(DequantGatherKernel::instance(), {{64, false}, {256, true}});
  const std::vector<std::int32_t> lengths = {5000, 130, 1, 2048};
  GatherCase compressed{.name = "compressed part", .block_size = 64, .seed = 31};
  GatherCase window{.name = "window part", .block_size = 256, .has_gather_lens = true, .seed = 32};
  std::int64_t compressed_rows = 0;
  for (std::int32_t length : lengths) {
    compressed.seq_lens.push_back(length / 4);
    window.seq_lens.push_back(length);
    window.gather_lens.push_back(std::min(length, 128));
    compressed_rows = std::max<std::int64_t>(compressed_rows, length / 4);
  }
  window.offset = compressed_rows;
  compressed.rows_out = window.rows_out = compressed_rows + 128;
  in::Random random(33);
  const GatherInputs compressed_inputs = make_gather_inputs(random, compressed);
  const GatherInputs window_inputs = make_gather_inputs(random, window);
  const in::HostTensor out = make_gather_out(compressed);
  in::HostTensor expected = out;
  gather_reference(compressed, compressed_inputs, expected);
  gather_reference(window, window_inputs, expected);
  Placement device;
  const TensorRef out_ref = device.put(out);
  DequantGatherKernel::instance()(gather_args(device, compressed, compressed_inputs, out_ref));
  DequantGatherKernel::instance()(gather_args(device, window, window_inputs, out_ref));
  finish();
  const std::vector<std::uint8_t> actual = device.get(out);
  std::string failures;
  append_failure(failures,
                 case_label("dsv4.dequant_gather", "prefill workspace in two calls (rows [0, " +
                                                       std::to_string(compressed_rows) +
                                                       ") compressed, then the window)"),
                 "out", compare_tensor(expected, actual, {"request", "row", "dim"}));
  EXPECT_NO_FAILURE(failures);
}

// ================================================================================================
// Compressors (spec sections 3-7)
// ================================================================================================

enum class CacheKind { ds_mla, full_bf16, full_e4m3 };

std::string_view cache_name(CacheKind kind) {
  switch (kind) {
    case CacheKind::ds_mla:
      return "fp8_ds_mla";
    case CacheKind::full_bf16:
      return "full bf16";
    case CacheKind::full_e4m3:
      return "full e4m3";
  }
  return "?";
}

// The compressed K cache a store writes, poisoned, with what the comparisons need.
struct KCache {
  in::HostTensor tensor;
  std::int64_t block_size = 0;  // B
  std::int64_t page_stride_bytes = 0;
  std::int64_t row_stride_bytes = 0;  // full caches
  std::int64_t pages = 0;
};

KCache make_k_cache(CacheKind kind, std::int64_t block_size, std::int64_t pages,
                    std::int64_t page_stride, std::int64_t full_row_padding) {
  KCache cache;
  cache.block_size = block_size;
  cache.pages = pages;
  if (kind == CacheKind::ds_mla) {
    cache.page_stride_bytes = page_stride > 0 ? page_stride : in::default_page_stride(block_size);
    cache.tensor = in::make_ds_mla_cache(pages, block_size, cache.page_stride_bytes);
  } else {
    const DType dtype = kind == CacheKind::full_bf16 ? DType::bf16 : DType::e4m3;
    const std::int64_t row = 512 + full_row_padding;
    cache.tensor = in::make_tensor(dtype, {pages, block_size, 512}, {block_size * row, row, 1}, 0);
    cache.row_stride_bytes = row * dtype_size_bytes(dtype);
    cache.page_stride_bytes = block_size * cache.row_stride_bytes;
  }
  return cache;
}

std::string compare_k_cache(CacheKind kind, const KCache& expected,
                            const std::vector<std::uint8_t>& actual,
                            const std::vector<long long>& written) {
  const std::vector<long long> slots = written;
  if (kind == CacheKind::ds_mla) {
    return ref::compare_ds_mla_rows(expected.tensor.bytes, actual, expected.page_stride_bytes,
                                    expected.block_size, slots);
  }
  return ref::compare_full_rows(expected.tensor.bytes, actual, expected.page_stride_bytes,
                                expected.row_stride_bytes, expected.block_size, slots,
                                kind == CacheKind::full_e4m3);
}

// --- C4: pool 8 overlapping rows, norm, RoPE, store -----------------------------------------

struct C4Case {
  std::string name;
  std::vector<in::RequestChunk> requests;
  CacheKind cache = CacheKind::ds_mla;
  std::int64_t kv_block_size = 64;    // B of the compressed cache (block 256 / 4)
  std::int64_t page_stride = 0;       // ds_mla: 0 = round_up(B * 584, 576)
  std::int64_t full_row_padding = 0;  // full caches: elements past 512 in each row
  DType norm_dtype = DType::bf16;
  std::int64_t state_row_padding = 0;  // elements (multiples of 16)
  std::int64_t state_block_padding = 0;
  std::int64_t cos_sin_row_stride = 64;
  std::int64_t extra_metadata = 0;  // positions / token_to_req longer than T
  std::int64_t short_kv_slots = 0;  // kv_slot_mapping shorter than T (the last are inactive)
  double drop = 0.03;               // boundary tokens losing a slot
  float fp8_scale = 0.02f;          // full e4m3 cache
  std::uint64_t seed = 1;
};

// Metadata shared by the C4 and C128 cases: per-token vectors and the cos/sin cache.
struct TokenTensors {
  in::HostTensor token_to_req;
  in::HostTensor positions;
  in::HostTensor slot_mapping;
  in::HostTensor kv_slot_mapping;
  in::HostTensor cos_sin;
  std::int64_t tokens = 0;
};

TokenTensors make_token_tensors(in::Random& random, const in::CompressorTokens& tokens,
                                std::int64_t extra_metadata, std::int64_t short_kv_slots,
                                std::int64_t cos_sin_row_stride) {
  TokenTensors result;
  result.tokens = static_cast<std::int64_t>(tokens.positions.size());
  std::vector<std::int32_t> token_to_req = tokens.token_to_req;
  std::vector<std::int64_t> positions = tokens.positions;
  std::int64_t max_position = 0;
  for (std::int64_t p : positions) max_position = std::max(max_position, p);
  for (std::int64_t i = 0; i < extra_metadata; ++i) {
    token_to_req.push_back(0);
    positions.push_back(random.uniform_int(0, max_position));
  }
  std::vector<std::int64_t> kv_slots = tokens.kv_slot_mapping;
  kv_slots.resize(
      static_cast<std::size_t>(std::max<std::int64_t>(0, result.tokens - short_kv_slots)));
  result.token_to_req = in::tensor_of(std::span<const std::int32_t>(token_to_req));
  result.positions = in::tensor_of(std::span<const std::int64_t>(positions));
  result.slot_mapping = in::tensor_of(std::span<const std::int64_t>(tokens.slot_mapping));
  result.kv_slot_mapping = in::tensor_of(std::span<const std::int64_t>(kv_slots));
  result.cos_sin = in::random_cos_sin(random, max_position + 1, 64, cos_sin_row_stride, DType::f32);
  return result;
}

std::string check_c4(const C4Case& c) {
  const bool full = c.cache != CacheKind::ds_mla;
  std::int64_t total = 0;
  for (const auto& r : c.requests) total += r.tokens;
  const std::string label = case_label(
      full ? "dsv4.c4_store_full" : "dsv4.c4_store",
      c.name + " (" + std::string(cache_name(c.cache)) + ", T=" + std::to_string(total) + ")");
  in::Random random(c.seed);
  const std::int64_t boundaries = in::count_boundaries(c.requests, 4);
  const std::int64_t pages = (boundaries + c.kv_block_size - 1) / c.kv_block_size + 2;
  const in::CompressorTokens tokens =
      in::make_compressor_tokens(random, c.requests, 4, pages * c.kv_block_size, c.drop);
  const TokenTensors meta =
      make_token_tensors(random, tokens, c.extra_metadata, c.short_kv_slots, c.cos_sin_row_stride);
  const in::CompressorState state = in::make_compressor_state(
      random, c.requests, 4, 1024, 8, c.state_row_padding, c.state_block_padding, 3);
  const in::HostTensor weight = in::random_norm_weight(random, c.norm_dtype);
  const std::vector<float> scale_value = {c.fp8_scale};
  const in::HostTensor fp8_scale = in::tensor_of(std::span<const float>(scale_value));
  const KCache cache =
      make_k_cache(c.cache, c.kv_block_size, pages, c.page_stride, c.full_row_padding);

  KCache expected = cache;
  const ref::NormWeightType norm =
      c.norm_dtype == DType::f32 ? ref::NormWeightType::kFloat32 : ref::NormWeightType::kBFloat16;
  auto fill_common = [&](auto& p) {
    p.state_cache = state.state.as<float>();
    p.state_block_stride = state.state.desc.stride(0);
    p.state_row_stride = state.state.desc.stride(1);
    p.state_block_size = 4;
    p.token_to_req = meta.token_to_req.as<int>();
    p.num_token_to_req = meta.token_to_req.desc.size(0);
    p.positions = meta.positions.as<long long>();
    p.num_positions = meta.positions.desc.size(0);
    p.slot_mapping = meta.slot_mapping.as<long long>();
    p.num_tokens = meta.tokens;
    p.block_table = state.block_table.as<int>();
    p.block_table_stride = state.block_table.desc.stride(0);
    p.block_table_rows = state.block_table.desc.size(0);
    p.block_table_width = state.block_table.desc.size(1);
    p.rms_norm_weight = weight.data();
    p.eps = 1e-6f;
    p.cos_sin_cache = meta.cos_sin.as<float>();
    p.cos_sin_stride = c.cos_sin_row_stride;
    p.k_cache = expected.tensor.as<unsigned char>();
    p.kv_slot_mapping = meta.kv_slot_mapping.as<long long>();
    p.num_kv_slots = meta.kv_slot_mapping.desc.size(0);
    p.kv_cache_block_size = c.kv_block_size;
  };
  std::vector<long long> written;
  if (full) {
    params::C4StoreFullParams p{};
    fill_common(p);
    p.kv_block_stride_bytes = expected.page_stride_bytes;
    p.kv_row_stride_bytes = expected.row_stride_bytes;
    p.fp8_scale = fp8_scale.as<float>();
    written = ref::c4_store_full(p, {c.cache == CacheKind::full_e4m3, norm});
  } else {
    params::C4StoreParams p{};
    fill_common(p);
    p.kv_block_stride_bytes = expected.page_stride_bytes;
    written = ref::c4_store(p, {norm});
  }
  if (written.empty()) return label + ": the case writes no row; it tests nothing (fix the case)";

  Placement device;
  C4StoreArgs args;
  args.state_cache = device.put(state.state);
  args.token_to_req = device.put(meta.token_to_req);
  args.positions = device.put(meta.positions);
  args.slot_mapping = device.put(meta.slot_mapping);
  args.block_table = device.put(state.block_table);
  args.rms_norm_weight = device.put(weight);
  args.eps = 1e-6f;
  args.cos_sin_cache = device.put(meta.cos_sin);
  args.k_cache = device.put(cache.tensor);
  args.kv_slot_mapping = device.put(meta.kv_slot_mapping);
  if (c.cache == CacheKind::full_e4m3) args.fp8_scale = device.put(fp8_scale);
  try {
    if (full) {
      C4StoreFullKernel::instance()(args);
    } else {
      C4StoreKernel::instance()(args);
    }
    finish();
  } catch (const std::exception& error) {
    return label + ": the call failed: " + error.what();
  }
  std::string failures;
  append_failure(failures, label,
                 "k_cache (" + std::to_string(written.size()) +
                     " rows written, B=" + std::to_string(c.kv_block_size) + ", page stride " +
                     std::to_string(expected.page_stride_bytes) + ")",
                 compare_k_cache(c.cache, expected, device.get(cache.tensor), written));
  return failures;
}

std::vector<C4Case> c4_cases() {
  using R = in::RequestChunk;
  std::vector<C4Case> cases;
  cases.push_back({.name = "one token at position 3 (rows -4..-1 are skipped)",
                   .requests = {R{3, 1}},
                   .drop = 0.0,
                   .seed = 41});
  cases.push_back({.name = "one decode token at position 1003, wider page stride",
                   .requests = {R{1003, 1}},
                   .page_stride = in::default_page_stride(64) + 576,
                   .drop = 0.0,
                   .seed = 42});
  cases.push_back({.name = "chunks straddling boundaries, f32 norm weight, B=16, padded state "
                           "and cos/sin rows, longer positions, shorter kv_slot_mapping",
                   .requests = {R{0, 37}, R{5, 18}, R{1000, 61}, R{2, 1}, R{6, 2}},
                   .kv_block_size = 16,
                   .norm_dtype = DType::f32,
                   .state_row_padding = 16,
                   .state_block_padding = 16,
                   .cos_sin_row_stride = 80,
                   .extra_metadata = 3,
                   .short_kv_slots = 2,
                   .seed = 43});
  cases.push_back({.name = "16396 tokens in 4 prefill chunks",
                   .requests = {R{0, 4100}, R{7, 4096}, R{20000, 4200}, R{123, 4000}},
                   .seed = 44});
  cases.push_back({.name = "one token at position 3",
                   .requests = {R{3, 1}},
                   .cache = CacheKind::full_bf16,
                   .drop = 0.0,
                   .seed = 45});
  cases.push_back({.name = "300 tokens, padded cache rows",
                   .requests = {R{0, 150}, R{601, 150}},
                   .cache = CacheKind::full_bf16,
                   .full_row_padding = 8,
                   .seed = 46});
  cases.push_back({.name = "300 tokens, f32 norm weight, padded cache rows",
                   .requests = {R{0, 150}, R{601, 150}},
                   .cache = CacheKind::full_e4m3,
                   .full_row_padding = 16,
                   .norm_dtype = DType::f32,
                   .seed = 47});
  cases.push_back({.name = "a small fp8_scale saturates codes at 448",
                   .requests = {R{0, 2000}},
                   .cache = CacheKind::full_e4m3,
                   .fp8_scale = 0.004f,
                   .seed = 48});
  cases.push_back({.name = "16400 tokens",
                   .requests = {R{0, 8200}, R{11, 8200}},
                   .cache = CacheKind::full_e4m3,
                   .kv_block_size = 16,
                   .fp8_scale = 0.03f,
                   .seed = 49});
  return cases;
}

TEST_F(Dsv4Gpu, C4StoresMatchTheReferenceWithinTolerance) {
  std::vector<C4StoreKey> keys;
  std::vector<C4StoreFullKey> full_keys;
  for (const C4Case& c : c4_cases()) {
    if (c.cache == CacheKind::ds_mla) {
      C4StoreKey key;
      key.norm_weight_dtype = c.norm_dtype;
      keys.push_back(key);
    } else {
      C4StoreFullKey key;
      key.store_full_fp8 = c.cache == CacheKind::full_e4m3;
      key.norm_weight_dtype = c.norm_dtype;
      full_keys.push_back(key);
    }
  }
  precompile(C4StoreKernel::instance(), keys);
  precompile(C4StoreFullKernel::instance(), full_keys);
  for (const C4Case& c : c4_cases()) EXPECT_NO_FAILURE(check_c4(c));
}

// --- C128 compress: pool 128 rows into compressed_kv ------------------------------------------

struct C128CompressCase {
  std::string name;
  std::vector<in::RequestChunk> requests;
  std::int64_t state_row_padding = 0;
  std::int64_t state_block_padding = 0;
  double drop = 0.03;
  std::uint64_t seed = 1;
};

std::string check_c128_compress(const C128CompressCase& c) {
  std::int64_t total = 0;
  for (const auto& r : c.requests) total += r.tokens;
  const std::string label =
      case_label("dsv4.c128_compress", c.name + " (T=" + std::to_string(total) + ")");
  in::Random random(c.seed);
  const in::CompressorTokens tokens =
      in::make_compressor_tokens(random, c.requests, 128, total + 1, c.drop);
  const TokenTensors meta = make_token_tensors(random, tokens, 0, 0, 64);
  const in::CompressorState state = in::make_compressor_state(
      random, c.requests, 8, 512, 128, c.state_row_padding, c.state_block_padding, 2);
  const in::HostTensor compressed = in::make_tensor(DType::f32, {total, 512});
  in::HostTensor expected = compressed;

  params::C128CompressParams p{};
  p.state_cache = state.state.as<float>();
  p.state_block_stride = state.state.desc.stride(0);
  p.state_row_stride = state.state.desc.stride(1);
  p.state_block_size = 8;
  p.token_to_req = meta.token_to_req.as<int>();
  p.num_token_to_req = meta.token_to_req.desc.size(0);
  p.positions = meta.positions.as<long long>();
  p.num_positions = meta.positions.desc.size(0);
  p.slot_mapping = meta.slot_mapping.as<long long>();
  p.num_tokens = total;
  p.block_table = state.block_table.as<int>();
  p.block_table_stride = state.block_table.desc.stride(0);
  p.block_table_rows = state.block_table.desc.size(0);
  p.block_table_width = state.block_table.desc.size(1);
  p.compressed_kv = expected.as<float>();
  const std::vector<long long> written = ref::c128_compress(p, {512});
  if (written.empty()) return label + ": the case writes no row; it tests nothing (fix the case)";

  Placement device;
  C128CompressArgs args;
  args.state_cache = device.put(state.state);
  args.token_to_req = device.put(meta.token_to_req);
  args.positions = device.put(meta.positions);
  args.slot_mapping = device.put(meta.slot_mapping);
  args.block_table = device.put(state.block_table);
  args.compressed_kv = device.put(compressed);
  try {
    C128CompressKernel::instance()(args);
    finish();
  } catch (const std::exception& error) {
    return label + ": the call failed: " + error.what();
  }
  const std::vector<std::uint8_t> actual = device.get(compressed);
  const std::int64_t begin = compressed.offset_bytes;
  const std::int64_t end = begin + total * 512 * 4;
  std::string failures;
  append_failure(failures, label,
                 "compressed_kv (" + std::to_string(written.size()) + " rows written)",
                 ref::compare_compressed_kv(float_view(expected.bytes, begin, total * 512),
                                            float_view(actual, begin, total * 512), 512, written));
  append_failure(failures, label, "compressed_kv guards",
                 in::compare_bytes(expected.bytes, in::splice(expected.bytes, actual, begin, end),
                                   in::element_locator(expected)));
  return failures;
}

std::vector<C128CompressCase> c128_compress_cases() {
  using R = in::RequestChunk;
  return {
      {"one token at position 127", {R{127, 1}}, 0, 0, 0.0, 51},
      {"chunks straddling boundaries, padded state rows and blocks",
       {R{0, 300}, R{1000, 200}, R{130, 1}, R{255, 3}},
       16,
       32,
       0.03,
       52},
      {"16492 tokens in 2 chunks", {R{0, 8192}, R{512, 8300}}, 0, 0, 0.03, 53},
  };
}

TEST_F(Dsv4Gpu, C128CompressMatchesTheReferenceWithinTolerance) {
  precompile(C128CompressKernel::instance(), {C128CompressKey{512, 512}});
  for (const C128CompressCase& c : c128_compress_cases()) {
    EXPECT_NO_FAILURE(check_c128_compress(c));
  }
}

// --- C128 stores: norm, RoPE, store a compressed_kv row --------------------------------------

struct C128StoreCase {
  std::string name;
  std::vector<in::RequestChunk> requests;
  CacheKind cache = CacheKind::ds_mla;
  std::int64_t kv_block_size = 2;  // B_k
  std::int64_t page_stride = 0;    // ds_mla: 0 = round_up(B_k * 584, 576)
  std::int64_t extra_pages = 2;
  std::int64_t full_row_padding = 0;
  DType norm_dtype = DType::bf16;
  std::int64_t cos_sin_row_stride = 64;
  double drop = 0.03;
  float fp8_scale = 0.02f;
  std::uint64_t seed = 1;
};

C128StoreKey c128_store_key(const C128StoreCase& c) {
  C128StoreKey key;
  key.kv_cache_block_size = static_cast<int>(c.kv_block_size);
  key.kv_block_stride =
      c.page_stride > 0 ? c.page_stride : in::default_page_stride(c.kv_block_size);
  key.norm_weight_dtype = c.norm_dtype;
  return key;
}

std::string check_c128_store(const C128StoreCase& c) {
  const bool full = c.cache != CacheKind::ds_mla;
  std::int64_t total = 0;
  for (const auto& r : c.requests) total += r.tokens;
  const std::string label = case_label(
      full ? "dsv4.c128_store_full" : "dsv4.c128_store",
      c.name + " (" + std::string(cache_name(c.cache)) + ", T=" + std::to_string(total) + ")");
  in::Random random(c.seed);
  const std::int64_t boundaries = in::count_boundaries(c.requests, 128);
  const std::int64_t pages = (boundaries + c.kv_block_size - 1) / c.kv_block_size + c.extra_pages;
  const in::CompressorTokens tokens =
      in::make_compressor_tokens(random, c.requests, 128, pages * c.kv_block_size, c.drop);
  const TokenTensors meta = make_token_tensors(random, tokens, 0, 0, c.cos_sin_row_stride);
  // Pooled rows of many magnitudes, so that the scale exponents vary.
  in::HostTensor compressed = in::make_tensor(DType::f32, {total, 512});
  for (std::int64_t t = 0; t < total; ++t) {
    const float magnitude = std::ldexp(1.0f, static_cast<int>(random.uniform_int(-8, 8)));
    for (std::int64_t e = 0; e < 512; ++e) {
      compressed.set<float>(t * 512 + e, random.uniform(-2.0f, 2.0f) * magnitude);
    }
  }
  const in::HostTensor weight = in::random_norm_weight(random, c.norm_dtype);
  const std::vector<float> scale_value = {c.fp8_scale};
  const in::HostTensor fp8_scale = in::tensor_of(std::span<const float>(scale_value));
  const KCache cache =
      make_k_cache(c.cache, c.kv_block_size, pages, c.page_stride, c.full_row_padding);
  KCache expected = cache;
  const ref::NormWeightType norm =
      c.norm_dtype == DType::f32 ? ref::NormWeightType::kFloat32 : ref::NormWeightType::kBFloat16;
  auto fill_common = [&](auto& p) {
    p.compressed_kv = compressed.as<float>();
    p.positions = meta.positions.as<long long>();
    p.num_positions = meta.positions.desc.size(0);
    p.slot_mapping = meta.slot_mapping.as<long long>();
    p.num_tokens = total;
    p.rms_norm_weight = weight.data();
    p.eps = 1e-6f;
    p.cos_sin_cache = meta.cos_sin.as<float>();
    p.cos_sin_stride = c.cos_sin_row_stride;
    p.k_cache = expected.tensor.as<unsigned char>();
    p.kv_slot_mapping = meta.kv_slot_mapping.as<long long>();
    p.num_kv_slots = meta.kv_slot_mapping.desc.size(0);
  };
  std::vector<long long> written;
  if (full) {
    params::C128StoreFullParams p{};
    fill_common(p);
    p.kv_block_stride_bytes = expected.page_stride_bytes;
    p.kv_row_stride_bytes = expected.row_stride_bytes;
    p.kv_cache_block_size = c.kv_block_size;
    p.fp8_scale = fp8_scale.as<float>();
    written = ref::c128_store_full(p, {c.cache == CacheKind::full_e4m3, norm});
  } else {
    params::C128StoreParams p{};
    fill_common(p);
    written = ref::c128_store(p, {c.kv_block_size, expected.page_stride_bytes, norm});
  }
  if (written.empty()) return label + ": the case writes no row; it tests nothing (fix the case)";

  Placement device;
  C128StoreArgs args;
  args.compressed_kv = device.put(compressed);
  args.positions = device.put(meta.positions);
  args.slot_mapping = device.put(meta.slot_mapping);
  args.rms_norm_weight = device.put(weight);
  args.eps = 1e-6f;
  args.cos_sin_cache = device.put(meta.cos_sin);
  args.k_cache = device.put(cache.tensor);
  args.kv_slot_mapping = device.put(meta.kv_slot_mapping);
  if (c.cache == CacheKind::full_e4m3) args.fp8_scale = device.put(fp8_scale);
  try {
    if (full) {
      C128StoreFullKernel::instance()(args);
    } else {
      C128StoreKernel::instance()(args);
    }
    finish();
  } catch (const std::exception& error) {
    return label + ": the call failed: " + error.what();
  }
  std::string failures;
  append_failure(failures, label,
                 "k_cache (" + std::to_string(written.size()) +
                     " rows written, B=" + std::to_string(c.kv_block_size) + ", page stride " +
                     std::to_string(expected.page_stride_bytes) + ")",
                 compare_k_cache(c.cache, expected, device.get(cache.tensor), written));
  return failures;
}

std::vector<C128StoreCase> c128_store_cases() {
  using R = in::RequestChunk;
  std::vector<C128StoreCase> cases;
  cases.push_back({.name = "one token at position 127, B=1, page stride 1152 (block 64)",
                   .requests = {R{127, 1}},
                   .kv_block_size = 1,
                   .drop = 0.0,
                   .seed = 61});
  cases.push_back({.name = "chunks straddling boundaries, B=2, page stride 1728 (block 256)",
                   .requests = {R{0, 300}, R{1000, 300}, R{255, 1}, R{127, 2}},
                   .extra_pages = 5,
                   .seed = 62});
  cases.push_back({.name = "f32 norm weight, B=2, page stride 1728",
                   .requests = {R{0, 700}},
                   .norm_dtype = DType::f32,
                   .seed = 63});
  cases.push_back({.name = "packed page stride 39168, B=2",
                   .requests = {R{0, 1000}, R{5000, 600}},
                   .page_stride = 39168,
                   .seed = 64});
  cases.push_back({.name = "16384 tokens, B=2, page stride 1728",
                   .requests = {R{0, 8192}, R{128, 8192}},
                   .seed = 65});
  // Every token a boundary: each warp then stores up to 32 rows, two in flight at a time.
  std::vector<R> boundaries;
  for (std::int64_t i = 0; i < 2500; ++i) boundaries.push_back(R{128 * (i + 1) - 1, 1});
  cases.push_back({.name = "2500 tokens, every one a boundary, B=2, page stride 1728",
                   .requests = boundaries,
                   .seed = 70});
  boundaries.resize(777);
  cases.push_back({.name = "777 tokens, every one a boundary, full e4m3, B=64",
                   .requests = boundaries,
                   .cache = CacheKind::full_e4m3,
                   .kv_block_size = 64,
                   .drop = 0.0,
                   .seed = 71});
  cases.push_back({.name = "one token at position 255, B=2",
                   .requests = {R{255, 1}},
                   .cache = CacheKind::full_bf16,
                   .drop = 0.0,
                   .seed = 66});
  cases.push_back({.name = "600 tokens, B=64, padded rows and cos/sin rows",
                   .requests = {R{0, 600}},
                   .cache = CacheKind::full_bf16,
                   .kv_block_size = 64,
                   .full_row_padding = 8,
                   .cos_sin_row_stride = 68,
                   .seed = 67});
  cases.push_back({.name = "16500 tokens, B=64",
                   .requests = {R{0, 16500}},
                   .cache = CacheKind::full_e4m3,
                   .kv_block_size = 64,
                   .fp8_scale = 0.03f,
                   .seed = 68});
  cases.push_back({.name = "f32 norm weight, a saturating fp8_scale, B=2",
                   .requests = {R{0, 1200}},
                   .cache = CacheKind::full_e4m3,
                   .norm_dtype = DType::f32,
                   .fp8_scale = 0.002f,
                   .seed = 69});
  return cases;
}

TEST_F(Dsv4Gpu, C128StoresMatchTheReferenceWithinTolerance) {
  std::vector<C128StoreKey> keys;
  std::vector<C128StoreFullKey> full_keys;
  for (const C128StoreCase& c : c128_store_cases()) {
    if (c.cache == CacheKind::ds_mla) {
      keys.push_back(c128_store_key(c));
    } else {
      C128StoreFullKey key;
      key.store_full_fp8 = c.cache == CacheKind::full_e4m3;
      key.norm_weight_dtype = c.norm_dtype;
      full_keys.push_back(key);
    }
  }
  precompile(C128StoreKernel::instance(), keys);
  precompile(C128StoreFullKernel::instance(), full_keys);
  for (const C128StoreCase& c : c128_store_cases()) EXPECT_NO_FAILURE(check_c128_store(c));
}

// ================================================================================================
// DCP pack (spec section 12): all bytes of `packed` bit-exact.
// ================================================================================================

enum class PackedLayout { contiguous, gathered_slice, pair_major };

struct DcpCase {
  std::string name;
  int world_size = 2;
  int interleave = 1;
  int rank = 0;
  bool has_row_starts = false;
  int topk = 512;
  std::int64_t rows = 17;
  std::int64_t columns = 3000;  // N: the local logits width
  std::int64_t logits_col_stride = 1;
  std::int64_t topk_col_stride = 1;
  PackedLayout layout = PackedLayout::contiguous;
  std::uint64_t seed = 1;
};

// Local indices whose global id g = (l / I) * W * I + rank * I + l % I lies near 2^24, where
// (float)g starts rounding.
std::vector<std::int32_t> indices_near_two_to_24(int world_size, int interleave, int rank) {
  std::vector<std::int32_t> indices;
  const std::int64_t round = static_cast<std::int64_t>(world_size) * interleave;
  for (std::int64_t g = (1 << 24) - 3 * round; g <= (1 << 24) + 3 * round; ++g) {
    if ((g / interleave) % world_size != rank) continue;
    indices.push_back(static_cast<std::int32_t>((g / round) * interleave + g % interleave));
  }
  return indices;
}

struct DcpTensors {
  in::HostTensor logits;
  in::HostTensor topk_indices;
  in::HostTensor row_starts;
  in::HostTensor packed;
  std::int64_t packed_origin = 0;  // element 0 of this rank's packed view, in floats
};

DcpTensors make_dcp_tensors(const DcpCase& c) {
  in::Random random(c.seed);
  DcpTensors t;
  const std::int64_t rows = c.rows;
  std::vector<std::int32_t> starts(static_cast<std::size_t>(rows), 0);
  std::int64_t widest_start = 0;
  if (c.has_row_starts) {
    for (auto& s : starts) {
      s = static_cast<std::int32_t>(random.uniform_int(0, 40));
      widest_start = std::max<std::int64_t>(widest_start, s);
    }
  }
  // Logits [R, N + widest start]; a row's local position l sits at column l + row_start.
  const std::int64_t width = c.columns == 0 ? 0 : c.columns + widest_start;
  t.logits = in::make_tensor(DType::f32, {rows, width},
                             {width * c.logits_col_stride + 8, c.logits_col_stride});
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t col = 0; col < width; ++col) {
      t.logits.set<float>(r * t.logits.desc.stride(0) + col * c.logits_col_stride,
                          in::random_logit(random, 0.05, 0.02));
    }
  }
  t.row_starts = in::tensor_of(std::span<const std::int32_t>(starts));
  const std::int64_t k = c.topk;
  t.topk_indices =
      in::make_tensor(DType::i32, {rows, k}, {k * c.topk_col_stride + 4, c.topk_col_stride});
  const std::vector<std::int32_t> near = indices_near_two_to_24(c.world_size, c.interleave, c.rank);
  for (std::int64_t r = 0; r < rows; ++r) {
    // A run of trailing -1 (a short local top-k) in some rows, -1 here and there in all.
    const std::int64_t trailing = random.chance(0.3) ? random.uniform_int(1, k) : 0;
    for (std::int64_t col = 0; col < k; ++col) {
      std::int32_t index = -1;
      if (c.columns > 0 && col < k - trailing && !random.chance(0.08)) {
        index = static_cast<std::int32_t>(random.uniform_int(0, c.columns - 1));
        if (r == 1 && col < static_cast<std::int64_t>(near.size())) {
          index = near[static_cast<std::size_t>(col)];  // ids near 2^24 (column clamped)
        } else if (r == 2 && col % 7 == 0) {
          index =
              static_cast<std::int32_t>(c.columns + random.uniform_int(0, 100));  // past the row
        }
      }
      t.topk_indices.set<std::int32_t>(r * t.topk_indices.desc.stride(0) + col * c.topk_col_stride,
                                       index);
    }
  }
  // packed: contiguous [R, K, 2]; this rank's slice of a gathered [R, W * K, 2]; or pairs
  // stored as two planes ([R, 2, K] viewed as [R, K, 2]).
  switch (c.layout) {
    case PackedLayout::contiguous:
      t.packed = in::make_tensor(DType::f32, {rows, k, 2});
      break;
    case PackedLayout::gathered_slice: {
      const std::int64_t gathered = c.world_size * k;
      t.packed = in::make_tensor(DType::f32, {rows, gathered, 2});
      t.packed.desc = TensorDesc::strided(DType::f32, std::vector<std::int64_t>{rows, k, 2},
                                          std::vector<std::int64_t>{gathered * 2, 2, 1});
      t.packed_origin = c.rank * k * 2;
      t.packed.offset_bytes += t.packed_origin * 4;
      break;
    }
    case PackedLayout::pair_major:
      t.packed = in::make_tensor(DType::f32, {rows, k, 2}, {2 * k, 1, k});
      break;
  }
  return t;
}

params::DcpPackParams dcp_params(const DcpCase& c, const DcpTensors& t, float* packed) {
  params::DcpPackParams p{};
  p.logits = t.logits.as<float>();
  p.logits_stride_row = t.logits.desc.stride(0);
  p.logits_stride_col = t.logits.desc.stride(1);
  p.num_cols = t.logits.desc.size(1);
  p.topk_indices = t.topk_indices.as<int>();
  p.topk_indices_stride_row = t.topk_indices.desc.stride(0);
  p.topk_indices_stride_col = t.topk_indices.desc.stride(1);
  p.row_starts = c.has_row_starts ? t.row_starts.as<int>() : nullptr;
  p.packed = packed;
  p.packed_stride_row = t.packed.desc.stride(0);
  p.packed_stride_col = t.packed.desc.stride(1);
  p.packed_stride_pair = t.packed.desc.stride(2);
  p.num_rows = c.rows;
  p.rank = c.rank;
  return p;
}

DcpPackKey dcp_key(const DcpCase& c) {
  return {c.topk, c.has_row_starts, c.world_size, c.interleave};
}

std::string check_dcp_pack(const DcpCase& c) {
  const std::string label = case_label(
      "dsv4.dcp_pack",
      c.name + " (W=" + std::to_string(c.world_size) + ", I=" + std::to_string(c.interleave) +
          ", rank " + std::to_string(c.rank) + ", topk " + std::to_string(c.topk) +
          (c.has_row_starts ? ", row starts" : ", no row starts") +
          ", R=" + std::to_string(c.rows) + ", N=" + std::to_string(c.columns) + ")");
  const DcpTensors t = make_dcp_tensors(c);
  in::HostTensor expected = t.packed;
  ref::dcp_pack(dcp_params(c, t, expected.as<float>()),
                {c.topk, c.has_row_starts, c.world_size, c.interleave});
  Placement device;
  DcpPackArgs args;
  args.logits = device.put(t.logits);
  args.topk_indices = device.put(t.topk_indices);
  if (c.has_row_starts) args.row_starts = device.put(t.row_starts);
  args.packed = device.put(t.packed);
  args.dcp_rank = c.rank;
  args.dcp_world_size = c.world_size;
  args.cp_interleave = c.interleave;
  try {
    DcpPackKernel::instance()(args);
    finish();
  } catch (const std::exception& error) {
    return label + ": the call failed: " + error.what();
  }
  std::string failures;
  append_failure(failures, label, "packed (score, id as a float)",
                 compare_tensor(expected, device.get(t.packed), {"row", "column", "pair"}));
  return failures;
}

std::vector<DcpCase> dcp_cases() {
  std::vector<DcpCase> cases;
  std::uint64_t seed = 71;
  int variant = 0;
  for (const int world_size : {2, 4, 8}) {
    for (const int interleave : {1, 2, 64}) {
      for (const bool row_starts : {false, true}) {
        DcpCase c;
        c.name = "ties, -inf, NaN, -1 inside and at the end, ids near 2^24, indices past the row";
        c.world_size = world_size;
        c.interleave = interleave;
        c.rank = (variant * 5 + 3) % world_size;
        c.has_row_starts = row_starts;
        c.rows = variant % 3 == 0 ? 1 : 17;
        c.columns = 3000 + variant * 37;
        c.layout = static_cast<PackedLayout>(variant % 3);
        c.logits_col_stride = variant % 4 == 1 ? 2 : 1;
        c.topk_col_stride = variant % 5 == 2 ? 2 : 1;
        c.seed = seed++;
        if (c.rows == 1) c.name += " (one row)";
        cases.push_back(c);
        ++variant;
      }
    }
  }
  for (const bool row_starts : {false, true}) {
    DcpCase c{.name = "N = 0: every index is -1",
              .has_row_starts = row_starts,
              .rows = 3,
              .columns = 0,
              .seed = seed++};
    cases.push_back(c);
  }
  cases.push_back({.name = "V4-Pro top-k, 64 rows",
                   .world_size = 4,
                   .rank = 3,
                   .topk = 1024,
                   .rows = 64,
                   .columns = 5000,
                   .layout = PackedLayout::gathered_slice,
                   .seed = seed++});
  cases.push_back({.name = "a 16384-token prefill chunk",
                   .world_size = 2,
                   .rank = 1,
                   .has_row_starts = true,
                   .rows = 16384,
                   .columns = 600,
                   .layout = PackedLayout::gathered_slice,
                   .seed = seed++});
  cases.push_back({.name = "top-k 2048 with row starts",
                   .world_size = 8,
                   .interleave = 2,
                   .rank = 6,
                   .has_row_starts = true,
                   .topk = 2048,
                   .rows = 5,
                   .columns = 9000,
                   .layout = PackedLayout::pair_major,
                   .seed = seed++});
  return cases;
}

TEST_F(Dsv4Gpu, DcpPackMatchesTheReferenceBitExactly) {
  std::vector<DcpPackKey> keys;
  for (const DcpCase& c : dcp_cases()) keys.push_back(dcp_key(c));
  precompile(DcpPackKernel::instance(), keys);
  for (const DcpCase& c : dcp_cases()) EXPECT_NO_FAILURE(check_dcp_pack(c));
}

// ================================================================================================
// The DCP exchange on one GPU (spec section 12.9): pack every rank's local top-k, concatenate
// rank-major, select, and compare with the exact top-k of the unsharded logits.
// ================================================================================================

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
    ref::dcp_pack(p, {c.topk, c.has_row_starts, w, c.interleave});

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

// ================================================================================================
// Serving-like batteries after warmup: zero compiles, zero loads.
// ================================================================================================

// Warms `config`'s manifest (`expected_keys` keys) from scratch with the monitor in error mode.
void warm_from_scratch(const AttentionKernels& kernels, std::size_t expected_keys) {
  for (KernelBase* kernel : all_kernels()) kernel->reset_for_testing();
  WarmupRegistry registry;
  kernels.register_warmup(registry);
  const Manifest manifest = registry.manifest();
  std::string lines;
  for (const std::string& line : manifest.lines()) lines += "\n  " + line;
  ASSERT_EQ(manifest.size(), expected_keys) << "the manifest:" << lines;
  Monitor::instance().set_mode(MonitorMode::error);
  const WarmupReport report = registry.warmup(WarmupOptions{.progress = ProgressStyle::none});
  ASSERT_TRUE(report.ok()) << "warmup failed: " << report.to_json();
  ASSERT_TRUE(Monitor::instance().armed()) << "warmup must arm the monitor";
}

std::vector<KernelCounters> all_counters() {
  std::vector<KernelCounters> counters;
  for (KernelBase* kernel : all_kernels()) counters.push_back(kernel->counters());
  return counters;
}

// No kernel compiled, loaded or missed its executor cache since `before`; returns the launches
// served from the cache meanwhile.
std::uint64_t expect_no_runtime_jit(const std::vector<KernelCounters>& before) {
  const std::vector<KernelBase*> owners = all_kernels();
  std::uint64_t hits = 0;
  for (std::size_t i = 0; i < owners.size(); ++i) {
    const KernelCounters after = owners[i]->counters();
    EXPECT_EQ(after.compiles, before[i].compiles) << owners[i]->name() << " compiled after warmup";
    EXPECT_EQ(after.loads, before[i].loads) << owners[i]->name() << " loaded a module after warmup";
    EXPECT_EQ(after.misses, before[i].misses) << owners[i]->name() << " missed its executor cache";
    EXPECT_EQ(after.runtime_jit, 0u) << owners[i]->name() << " saw a runtime JIT";
    hits += after.hits - before[i].hits;
  }
  const std::vector<JitEvent> events = Monitor::instance().events();
  EXPECT_TRUE(events.empty()) << "the monitor saw " << events.size()
                              << " runtime JIT events, the first: " << events.front().kernel << " ["
                              << events.front().key << "] from " << events.front().descriptors;
  return hits;
}

TEST_F(Dsv4Gpu, WarmedDefaultManifestServesTheServingBatteryWithoutCompiling) {
  // The serving battery (kernels/dsv4/battery.hpp): engine-shaped steps of decodes and prefill
  // chunks (1 .. 8192 tokens), every call the attention layers make, 3 layers of each kind
  // with their own caches, after warming the default configuration's 8 keys.
  const AttentionKernels kernels(default_config());
  warm_from_scratch(kernels, 8);
  if (HasFatalFailure()) return;
  if (reference_backend_) reference_backend_->execute = false;  // dry run: count, do not run
  BatteryOptions options;
  options.seed = 2024;
  options.layers_per_kind = 3;
  const std::unique_ptr<BatteryMemory> memory =
      dry_run() ? make_virtual_battery_memory(0) : make_device_battery_memory(0);
  BatteryWorkspace workspace(kernels, options, *memory);
  StepGenerator steps(kernels.config(), options);
  const std::vector<KernelCounters> before = all_counters();
  std::map<CallKind, int> calls;
  std::int64_t fewest_tokens = 1 << 30, most_tokens = 0;
  constexpr int kSteps = 48;
  for (int i = 0; i < kSteps; ++i) {
    const ServingStep step = steps.next();
    fewest_tokens = std::min(fewest_tokens, step.num_tokens());
    most_tokens = std::max(most_tokens, step.num_tokens());
    for (const AttentionCall& call : workspace.calls(step)) {
      try {
        run_call(kernels, call);
      } catch (const std::exception& error) {
        FAIL() << "serving battery, " << step.summary() << ": the " << to_string(call.kind)
               << " call of " << to_string(call.layer) << " layer " << call.layer_index
               << " failed (a RuntimeJitError means the warmup missed a key the runtime "
                  "reaches): "
               << error.what();
      }
      ++calls[call.kind];
    }
  }
  finish();
  const std::uint64_t hits = expect_no_runtime_jit(before);
  EXPECT_GT(hits, 0u) << "the battery launched nothing";
  EXPECT_EQ(fewest_tokens, 1) << "the battery never ran a one-token step";
  EXPECT_GE(most_tokens, 4096) << "the battery never ran a large prefill step";
  for (const CallKind kind : {CallKind::compressor, CallKind::indexer_q,
                              CallKind::gather_compressed, CallKind::gather_window}) {
    EXPECT_GT(calls[kind], 0) << "the serving battery never made a " << to_string(kind) << " call";
  }
}

// Device tensors sized for the largest call, and views of them for each call's size.
struct BatteryBuffers {
  in::HostTensor positions, q, cos_sin, weights, q_fp8, weights_out;  // indexer
  // Dequant-gather: three caches (window B=256, C4 B=64, C128 B=2).
  in::HostTensor out, seq_lens, gather_lens;
  std::vector<GatherInputs> gather_caches;
  // Compressors: per-token metadata and, per layer, a state and a cache.
  TokenTensors c4_tokens, c128_tokens;
  std::vector<in::CompressorState> c4_states, c128_states;
  std::vector<KCache> c4_caches, c128_caches;
  in::HostTensor compressed_kv, norm_weight;
  // DCP.
  in::HostTensor logits, topk_indices, row_starts, packed;
};

TEST_F(Dsv4Gpu, WarmedManifestWithDcpServesACompactBatteryWithoutCompiling) {
  // A second battery written independently of the serving one: the default configuration plus
  // decode context parallelism over 2 ranks (spec section 11's 8 keys and section 12.9's 2 DCP
  // pack keys), token counts log-uniform in [1, 8192], 3 layers' caches per compressor kind,
  // DCP packs for both ranks with and without row starts.
  Dsv4Config config = default_config();
  config.serving.dcp_world_size = 2;
  const AttentionKernels kernels(config);
  warm_from_scratch(kernels, 10);
  if (HasFatalFailure()) return;
  if (reference_backend_) reference_backend_->execute = false;  // dry run: count, do not run

  constexpr std::int64_t kMaxTokens = 8192;
  constexpr std::int64_t kLayers = 3;
  in::Random random(91);
  BatteryBuffers b;
  // Indexer-Q FP8, f32 cos/sin (the dtype the model's RoPE cache has).
  b.positions = in::make_tensor(DType::i64, {kMaxTokens});
  for (std::int64_t t = 0; t < kMaxTokens; ++t) b.positions.set<std::int64_t>(t, t % 65536);
  b.q = in::make_tensor(DType::bf16, {kMaxTokens, 64, 128});
  b.cos_sin = in::random_cos_sin(random, 65536, 64, 64, DType::f32);
  b.weights = in::make_tensor(DType::bf16, {kMaxTokens, 64});
  b.q_fp8 = in::make_tensor(DType::u8, {kMaxTokens, 64, 128});
  b.weights_out = in::make_tensor(DType::f32, {kMaxTokens, 64});
  // Dequant-gather: 8 requests of up to 2048 positions.
  constexpr std::int64_t kRequests = 8;
  constexpr std::int32_t kLongest = 2048;
  const std::vector<std::int32_t> full_lengths(kRequests, kLongest);
  for (const int block : {256, 64, 2}) {
    GatherCase c{.block_size = block, .seq_lens = full_lengths, .extra_pages = 1};
    b.gather_caches.push_back(make_gather_inputs(random, c));
  }
  b.out = in::make_tensor(DType::bf16, {kRequests, kLongest + 128, 512});
  b.seq_lens = in::make_tensor(DType::i32, {kRequests});
  b.gather_lens = in::make_tensor(DType::i32, {kRequests});
  // Compressors: 8192 tokens of 2 requests; each layer has its own state and cache.
  const std::vector<in::RequestChunk> requests = {{0, kMaxTokens / 2}, {100, kMaxTokens / 2}};
  const std::int64_t c4_pages = (in::count_boundaries(requests, 4) + 63) / 64 + 1;
  const std::int64_t c128_pages = (in::count_boundaries(requests, 128) + 1) / 2 + 1;
  b.c4_tokens = make_token_tensors(
      random, in::make_compressor_tokens(random, requests, 4, c4_pages * 64), 0, 0, 64);
  b.c128_tokens = make_token_tensors(
      random, in::make_compressor_tokens(random, requests, 128, c128_pages * 2), 0, 0, 64);
  for (std::int64_t layer = 0; layer < kLayers; ++layer) {
    b.c4_states.push_back(in::make_compressor_state(random, requests, 4, 1024, 8, 0, 0, 1));
    b.c128_states.push_back(in::make_compressor_state(random, requests, 8, 512, 128, 0, 0, 1));
    b.c4_caches.push_back(make_k_cache(CacheKind::ds_mla, 64, c4_pages, 0, 0));
    b.c128_caches.push_back(make_k_cache(CacheKind::ds_mla, 2, c128_pages, 0, 0));
  }
  b.compressed_kv = in::make_tensor(DType::f32, {kMaxTokens, 512});
  b.norm_weight = in::random_norm_weight(random, DType::bf16);
  // DCP pack: up to 64 decode rows over a 4096-wide local shard.
  b.logits = in::make_tensor(DType::f32, {64, 4096});
  b.topk_indices = in::make_tensor(DType::i32, {64, 512});
  for (std::int64_t i = 0; i < 64 * 512; ++i) {
    b.topk_indices.set<std::int32_t>(i, static_cast<std::int32_t>(random.uniform_int(-1, 4095)));
  }
  b.row_starts = in::make_tensor(DType::i32, {64});
  for (std::int64_t i = 0; i < 64; ++i) b.row_starts.set<std::int32_t>(i, 0);
  b.packed = in::make_tensor(DType::f32, {64, 512, 2});

  Placement device;
  auto put = [&device](const in::HostTensor& t) { return device.put(t); };
  const TensorRef positions = put(b.positions), q = put(b.q), cos_sin = put(b.cos_sin),
                  weights = put(b.weights), q_fp8 = put(b.q_fp8), weights_out = put(b.weights_out);
  const TensorRef out = put(b.out);
  std::vector<TensorRef> caches, tables;
  for (const GatherInputs& g : b.gather_caches) {
    caches.push_back(put(g.cache));
    tables.push_back(put(g.block_table));
  }
  auto token_refs = [&](const TokenTensors& t) {
    return std::vector<TensorRef>{put(t.token_to_req), put(t.positions), put(t.slot_mapping),
                                  put(t.kv_slot_mapping), put(t.cos_sin)};
  };
  const std::vector<TensorRef> c4_meta = token_refs(b.c4_tokens);
  const std::vector<TensorRef> c128_meta = token_refs(b.c128_tokens);
  std::vector<TensorRef> c4_state, c4_table, c4_cache, c128_state, c128_table, c128_cache;
  for (std::int64_t layer = 0; layer < kLayers; ++layer) {
    const auto l = static_cast<std::size_t>(layer);
    c4_state.push_back(put(b.c4_states[l].state));
    c4_table.push_back(put(b.c4_states[l].block_table));
    c4_cache.push_back(put(b.c4_caches[l].tensor));
    c128_state.push_back(put(b.c128_states[l].state));
    c128_table.push_back(put(b.c128_states[l].block_table));
    c128_cache.push_back(put(b.c128_caches[l].tensor));
  }
  const TensorRef compressed = put(b.compressed_kv), weight = put(b.norm_weight);
  const TensorRef logits = put(b.logits), topk = put(b.topk_indices), starts = put(b.row_starts),
                  packed = put(b.packed);

  // A prefix view: the first `count` entries of dim 0, the rest of the layout unchanged.
  auto prefix = [](TensorRef ref, std::int64_t count) {
    ref.desc.shape[0] = count;
    return ref;
  };
  // Per-call lengths (seq_lens / gather_lens), uploaded per call.
  std::deque<in::HostTensor> call_tensors;

  const std::vector<KernelCounters> before = all_counters();
  std::map<std::string, int> calls;
  constexpr int kCalls = 120;
  for (int call = 0; call < kCalls; ++call) {
    // Token counts log-uniform in [1, 8192]: decode and prefill alike.
    const auto tokens = static_cast<std::int64_t>(
        std::clamp(std::exp2(random.uniform(0.0f, 13.0f)), 1.0f, static_cast<float>(kMaxTokens)));
    const auto layer = static_cast<std::size_t>(random.uniform_int(0, kLayers - 1));
    const std::int64_t kind = random.uniform_int(0, 5);
    SCOPED_TRACE("battery call " + std::to_string(call) + ", kind " + std::to_string(kind) + ", " +
                 std::to_string(tokens) + " tokens, layer " + std::to_string(layer));
    try {
      if (kind == 0) {
        kernels.run_indexer_q_fp8({prefix(positions, tokens), prefix(q, tokens), cos_sin,
                                   prefix(weights, tokens), 0.011048543f},
                                  {prefix(q_fp8, tokens), prefix(weights_out, tokens)});
        ++calls["indexer_q_fp8"];
      } else if (kind == 1) {
        // One prefill's two gathers: compressed (C4 or C128 cache), then the window.
        const std::int64_t reqs = random.uniform_int(1, kRequests);
        std::vector<std::int32_t> lengths, windows;
        std::int32_t longest_compressed = 0;
        const bool c128 = random.chance(0.5);
        std::vector<std::int32_t> compressed_lengths;
        for (std::int64_t r = 0; r < reqs; ++r) {
          lengths.push_back(static_cast<std::int32_t>(random.uniform_int(1, kLongest)));
          windows.push_back(std::min(lengths.back(), 128));
          compressed_lengths.push_back(lengths.back() / (c128 ? 128 : 4));
          longest_compressed = std::max(longest_compressed, compressed_lengths.back());
        }
        const in::HostTensor& seq =
            call_tensors.emplace_back(in::tensor_of(std::span<const std::int32_t>(lengths)));
        const in::HostTensor& window =
            call_tensors.emplace_back(in::tensor_of(std::span<const std::int32_t>(windows)));
        const in::HostTensor& compressed_seq = call_tensors.emplace_back(
            in::tensor_of(std::span<const std::int32_t>(compressed_lengths)));
        TensorRef workspace = prefix(out, reqs);
        workspace.desc.shape[1] = longest_compressed + 128;
        DequantGatherArgs first;
        first.out = workspace;
        first.k_cache = caches[c128 ? 2 : 1];
        first.seq_lens = put(compressed_seq);
        first.block_table = prefix(tables[c128 ? 2 : 1], reqs);
        first.offset = 0;
        kernels.run_dequant_gather(first);
        DequantGatherArgs second;
        second.out = workspace;
        second.k_cache = caches[0];
        second.seq_lens = put(seq);
        second.gather_lens = put(window);
        second.block_table = prefix(tables[0], reqs);
        second.offset = longest_compressed;
        kernels.run_dequant_gather(second);
        ++calls["dequant_gather"];
      } else if (kind == 2 || kind == 3) {
        CompressorCall compressor;
        compressor.compress_ratio = 4;
        C4StoreArgs& a = compressor.c4;
        a.state_cache = c4_state[layer];
        a.token_to_req = prefix(c4_meta[0], tokens);
        a.positions = prefix(c4_meta[1], tokens);
        a.slot_mapping = prefix(c4_meta[2], tokens);
        a.block_table = c4_table[layer];
        a.rms_norm_weight = weight;
        a.cos_sin_cache = c4_meta[4];
        a.k_cache = c4_cache[layer];
        a.kv_slot_mapping = prefix(c4_meta[3], tokens);
        kernels.run_compressor(compressor);
        ++calls["c4"];
      } else if (kind == 4) {
        CompressorCall compressor;
        compressor.compress_ratio = 128;
        C128CompressArgs& a = compressor.c128_compress;
        a.state_cache = c128_state[layer];
        a.token_to_req = prefix(c128_meta[0], tokens);
        a.positions = prefix(c128_meta[1], tokens);
        a.slot_mapping = prefix(c128_meta[2], tokens);
        a.block_table = c128_table[layer];
        a.compressed_kv = prefix(compressed, tokens);
        C128StoreArgs& s = compressor.c128_store;
        s.compressed_kv = prefix(compressed, tokens);
        s.positions = prefix(c128_meta[1], tokens);
        s.slot_mapping = prefix(c128_meta[2], tokens);
        s.rms_norm_weight = weight;
        s.cos_sin_cache = c128_meta[4];
        s.k_cache = c128_cache[layer];
        s.kv_slot_mapping = prefix(c128_meta[3], tokens);
        kernels.run_compressor(compressor);
        ++calls["c128"];
      } else {
        const std::int64_t rows = random.uniform_int(1, 64);
        DcpPackArgs a;
        a.logits = prefix(logits, rows);
        a.topk_indices = prefix(topk, rows);
        if (random.chance(0.5)) a.row_starts = prefix(starts, rows);
        a.packed = prefix(packed, rows);
        a.dcp_rank = static_cast<int>(random.uniform_int(0, 1));
        a.dcp_world_size = 2;
        a.cp_interleave = 1;
        kernels.run_dcp_pack(a);
        ++calls["dcp_pack"];
      }
    } catch (const std::exception& error) {
      FAIL() << "a warmed call failed (a RuntimeJitError means the warmup missed a key the "
                "runtime reaches): "
             << error.what();
    }
  }
  finish();
  const std::uint64_t hits = expect_no_runtime_jit(before);
  EXPECT_GE(hits, static_cast<std::uint64_t>(kCalls)) << "the battery launched too little";
  for (const char* kind : {"indexer_q_fp8", "dequant_gather", "c4", "c128", "dcp_pack"}) {
    EXPECT_GT(calls[kind], 0) << "the battery never called " << kind;
  }
}

}  // namespace
}  // namespace zerojit::dsv4

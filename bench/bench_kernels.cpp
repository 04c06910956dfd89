// Achieved memory bandwidth of every DSv4 kernel at three sizes (five for the C128 stores),
// against a device-to-device copy measured in the same run (docs/BENCHMARKS.md, "Kernel
// bandwidth"). bench/torch_composite.py times the same math as a PyTorch eager composite on
// inputs of the same shapes and distributions; bench/plot_bandwidth.py draws both.
//
//   zerojit_bench_kernels [--json PATH] [--kernels LIST] [--sizes LIST] [--repeat N]
//   zerojit_bench_kernels --dry-run [--kernels LIST] [--sizes LIST] [--compile-arch ARCH]
//
// A dry run needs no GPU: it builds every case in host memory, checks its arguments with the
// kernel's plan, compiles the planned keys (sm_90a by default) and the timing spin with NVRTC,
// runs the CPU reference on the first input set and applies the write check below to it.
//
// Sizes: `small` is a decode step (a few dozen tokens), `serving` the default
// max_num_batched_tokens (8192 tokens), `large` a prefill big enough to move several times the
// L2 cache (64k-256k tokens, or many gathered rows).
//
// Method (the same in torch_composite.py):
//  * Inputs are random and valid (tests/support/dsv4_inputs.hpp): permuted block tables,
//    prefill chunks where 1 token in 4 (C4) or 128 (C128) is a compress boundary, decode steps
//    with a share of boundary tokens, gathers of several thousand rows per request.
//  * Bytes are the fewest a kernel must move: each input it needs read once, each output
//    written once (the formula of every kernel is below, in its builder, and in the output).
//    For the compressors that is what the active (boundary) tokens need - state rows read,
//    rows written - plus the per-token metadata of every token. A gather of 4-byte values
//    (the DCP pack's logits) still moves whole 32-byte sectors: for such a case the program
//    also counts the distinct sectors its indices touch and prints the bandwidth on those.
//  * The first launch compiles and loads (warmup, not timed). Then each repetition enqueues a
//    short GPU spin (no memory traffic), a start event, the launch and an end event, so the
//    host's launch cost hides behind the spin and the events time the kernel alone. Median
//    and minimum of the repetitions.
//  * Cases whose bytes would fit in the L2 rotate among several copies of their inputs (same
//    bytes at other addresses, up to 16), so that most repetitions read from DRAM; the number
//    of copies is reported as `sets`. Decode-sized cases stay L2-resident all the same: they
//    measure latency, not bandwidth.
//  * The copy roofline is cuMemcpyDtoDAsync of 1 GiB (bytes read + written), timed the same
//    way at the start and at the end of the run; the faster of the two is the roofline.
//  * After timing, the outputs of the first input set (poisoned with 0xA5 before the warmup)
//    are read back: the bytes that changed must be at most the bytes the case should write and
//    at least 90 % of them (a stray code may equal 0xA5). This catches a case whose metadata
//    left every token inactive, which would report an absurd bandwidth.
//
// Exit codes: 0 = measured, every write check passed; 1 = an error or a failed write check;
// 77 = no CUDA device (the message says why; nothing measured, no JSON written).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "dsv4/c128_compress/c128_compress.hpp"
#include "dsv4/c128_store/c128_store.hpp"
#include "dsv4/c4_store/c4_store.hpp"
#include "dsv4/compressor/reference.hpp"
#include "dsv4/dcp_pack/dcp_pack.hpp"
#include "dsv4/dcp_pack/reference.hpp"
#include "dsv4/dequant_gather/dequant_gather.hpp"
#include "dsv4/dequant_gather/reference.hpp"
#include "dsv4/indexer_q/indexer_q.hpp"
#include "dsv4/indexer_q/reference.hpp"
#include "support/dsv4_inputs.hpp"
#include "zerojit/zerojit.hpp"

namespace {

namespace in = zerojit::dsv4::testing;
namespace dsv4 = zerojit::dsv4;
namespace ref = zerojit::dsv4::reference;
namespace params = zj::dsv4;
namespace cuda = zerojit::cuda;
using zerojit::DType;
using zerojit::TensorRef;

constexpr int kSkipExitCode = 77;

// DSv4-Flash shapes (spec 0.1).
constexpr std::int64_t kIndexHeads = 64;
constexpr std::int64_t kIndexHeadDim = 128;
constexpr std::int64_t kRopeDim = 64;
constexpr std::int64_t kHeadSize = 512;
constexpr std::int64_t kCosSinRowBytes = kRopeDim * 4;  // one f32 cos/sin row
constexpr std::int64_t kDsMlaRowBytes = 584;            // 576 data + 8 scale bytes
constexpr std::int64_t kFullBf16RowBytes = kHeadSize * 2;
constexpr std::int64_t kNormWeightBytes = kHeadSize * 2;  // bf16

// Rotation: inputs are copied until the copies together move this many times the L2's bytes,
// at most kMaxInputSets copies and kMaxSetBytes of device memory per case.
constexpr std::int64_t kColdFootprintInL2s = 4;
constexpr int kMaxInputSets = 16;
constexpr std::int64_t kMaxSetBytes = std::int64_t{16} << 30;
constexpr std::int64_t kCopyBytes = std::int64_t{1} << 30;

const std::vector<std::string> kKernelNames = {"indexer_q_fp8", "indexer_q_mxfp4", "dequant_gather",
                                               "c4_store",      "c4_store_full",   "c128_compress",
                                               "c128_store",    "c128_store_full", "dcp_pack"};
const std::vector<std::string> kSizeNames = {"small", "serving", "large", "dense", "dense_large"};

// --- Device memory --------------------------------------------------------------------------

// Device memory, or (dry run) 256-byte aligned host memory standing in for it.
class DeviceMemory {
 public:
  DeviceMemory(std::size_t bytes, bool host) : bytes_(bytes) {
    if (host) {
      constexpr std::size_t kAlignment = 256;  // what cuMemAlloc gives
      host_.assign(bytes + kAlignment, 0);
      const auto base = reinterpret_cast<std::uintptr_t>(host_.data());
      address_ = (base + kAlignment - 1) / kAlignment * kAlignment;
    } else {
      cuda::check(cuda::driver().cuMemAlloc(&address_, bytes == 0 ? 1 : bytes), "cuMemAlloc");
    }
  }
  ~DeviceMemory() {
    if (host_.empty() && address_ != 0) cuda::driver().cuMemFree(address_);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  cuda::DevicePtr address() const { return address_; }
  std::uint8_t* pointer() const { return reinterpret_cast<std::uint8_t*>(address_); }
  std::size_t bytes() const { return bytes_; }
  bool on_host() const { return !host_.empty(); }

  void upload(const void* source) {
    if (on_host()) {
      std::memcpy(pointer(), source, bytes_);
    } else {
      cuda::check(cuda::driver().cuMemcpyHtoD(address_, source, bytes_), "cuMemcpyHtoD");
    }
  }
  void copy_from(const DeviceMemory& other) {
    if (on_host()) {
      std::memcpy(pointer(), other.pointer(), bytes_);
    } else {
      cuda::check(cuda::driver().cuMemcpyDtoD(address_, other.address(), bytes_), "cuMemcpyDtoD");
    }
  }
  void download(std::vector<std::uint8_t>& host) const {
    host.resize(bytes_);
    if (on_host()) {
      std::memcpy(host.data(), pointer(), bytes_);
    } else {
      cuda::check(cuda::driver().cuMemcpyDtoH(host.data(), address_, bytes_), "cuMemcpyDtoH");
    }
  }

 private:
  cuda::DevicePtr address_ = 0;
  std::size_t bytes_;
  std::vector<std::uint8_t> host_;
};

// One input set of a case: device copies of host tensors (whole allocations, guards included).
// The first set uploads; a replica holds the same bytes at other addresses, and its put() hands
// out its copies in the order the original was filled, so that one builder function makes the
// arguments of every set.
class DeviceSet {
 public:
  explicit DeviceSet(bool host) : host_(host) {}

  // `output`: the write check reads it back.
  TensorRef put(const in::HostTensor& tensor, bool output = false) {
    const std::size_t bytes = tensor.bytes.size();
    if (replica_) {
      if (next_ >= memory_.size() || memory_[next_]->bytes() != bytes) {
        throw std::logic_error(
            "DeviceSet: a replica was filled in another order than its original");
      }
    } else {
      memory_.push_back(std::make_unique<DeviceMemory>(bytes, host_));
      memory_.back()->upload(tensor.bytes.data());
      outputs_.push_back(output);
    }
    const DeviceMemory& memory = *memory_[next_++];
    return zerojit::make_tensor_ref(memory.pointer() + tensor.offset_bytes, tensor.desc);
  }

  DeviceSet replicate() const {
    DeviceSet copy(host_);
    copy.replica_ = true;
    copy.outputs_ = outputs_;
    for (const auto& memory : memory_) {
      copy.memory_.push_back(std::make_unique<DeviceMemory>(memory->bytes(), host_));
      copy.memory_.back()->copy_from(*memory);
    }
    return copy;
  }

  std::int64_t allocated_bytes() const {
    std::int64_t total = 0;
    for (const auto& memory : memory_) total += static_cast<std::int64_t>(memory->bytes());
    return total;
  }

  // Bytes of the outputs that no longer hold the sentinel.
  std::int64_t changed_output_bytes() const {
    if (!host_) cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    std::int64_t changed = 0;
    std::vector<std::uint8_t> host;
    for (std::size_t i = 0; i < memory_.size(); ++i) {
      if (!outputs_[i]) continue;
      memory_[i]->download(host);
      changed += std::count_if(host.begin(), host.end(),
                               [](std::uint8_t byte) { return byte != in::kSentinel; });
    }
    return changed;
  }

 private:
  bool host_;
  std::vector<std::unique_ptr<DeviceMemory>> memory_;
  std::vector<bool> outputs_;
  std::size_t next_ = 0;
  bool replica_ = false;
};

// --- The spin that hides the host's launch cost ----------------------------------------------

constexpr std::string_view kSpinSource =
    R"(// Spins one thread for `cycles` SM clock cycles and touches no memory. The bandwidth
// benchmark enqueues it before each timed launch, so that the host enqueues the start event
// and the launch while the GPU is still busy and the events time the kernel alone.
namespace zj::bench {
__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
}  // namespace zj::bench
)";
constexpr zerojit::EmbeddedFile kSpinFiles[] = {{"bench/spin.cu", kSpinSource}};

struct SpinKey {
  int threads = 1;
  static constexpr auto fields() {
    return std::tuple{zerojit::field("threads", &SpinKey::threads)};
  }
  auto operator<=>(const SpinKey&) const = default;
};

struct SpinDescriptors {
  int threads = 1;
  static constexpr auto fields() {
    return std::tuple{zerojit::field("threads", &SpinDescriptors::threads)};
  }
};

class SpinKernel final : public zerojit::JitKernel<SpinKey, SpinDescriptors> {
 public:
  SpinKernel() : JitKernel("bench.spin") {}

  SpinKey dispatch(const SpinDescriptors& descriptors) const override {
    return SpinKey{descriptors.threads};
  }
  zerojit::Program program(const SpinKey& key) const override {
    static const zerojit::EmbeddedFileSet files{std::span<const zerojit::EmbeddedFile>(kSpinFiles)};
    zerojit::Program program;
    program.kernel_name = name();
    program.files = &files;
    program.source_path = "bench/spin.cu";
    program.name_expressions = {"zj::bench::spin_kernel"};
    program.key_text = zerojit::describe(key);
    return program;
  }
  void operator()(long long cycles, cuda::Stream stream) {
    const SpinDescriptors descriptors{1};
    zerojit::LaunchSpec<SpinKey> spec;
    spec.key = dispatch(descriptors);
    spec.geometry.block.x = 1;
    spec.args.push(cycles);
    launch(spec, zerojit::LaunchTarget{0, stream}, &descriptors);
  }
};

// --- Timing ----------------------------------------------------------------------------------

struct Measurement {
  double median_us = 0.0;
  double min_us = 0.0;
  int repetitions = 0;
};

using Launch = std::function<void(cuda::Stream)>;

class Timer {
 public:
  Timer(cuda::Stream stream, double clock_khz) : stream_(stream), clock_khz_(clock_khz) {}

  // Warms up (the first launch of each set compiles and loads), then times `repetitions`
  // launches, rotating among the sets.
  Measurement measure(const std::vector<Launch>& launches, int repetitions) {
    const auto& api = cuda::driver();
    for (const Launch& launch : launches) launch(stream_);
    spin_(1, stream_);  // compiles the spin once
    cuda::check(api.cuStreamSynchronize(stream_), "cuStreamSynchronize (warmup)");

    // What one launch costs the host, so that the spin outlasts it.
    constexpr int kProbe = 4;
    const auto probe_start = std::chrono::steady_clock::now();
    for (int i = 0; i < kProbe; ++i) {
      launches[static_cast<std::size_t>(i) % launches.size()](stream_);
    }
    const double host_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - probe_start)
            .count() /
        kProbe;
    cuda::check(api.cuStreamSynchronize(stream_), "cuStreamSynchronize (probe)");
    const double spin_us = std::max(20.0, 3.0 * host_us + 10.0);
    const auto spin_cycles = static_cast<long long>(spin_us * clock_khz_ / 1000.0);

    std::vector<cuda::Event> starts(static_cast<std::size_t>(repetitions));
    std::vector<cuda::Event> ends(static_cast<std::size_t>(repetitions));
    for (int r = 0; r < repetitions; ++r) {
      cuda::check(api.cuEventCreate(&starts[static_cast<std::size_t>(r)], cuda::kEventDefault),
                  "cuEventCreate");
      cuda::check(api.cuEventCreate(&ends[static_cast<std::size_t>(r)], cuda::kEventDefault),
                  "cuEventCreate");
    }
    for (int r = 0; r < repetitions; ++r) {
      const auto i = static_cast<std::size_t>(r);
      spin_(spin_cycles, stream_);
      cuda::check(api.cuEventRecord(starts[i], stream_), "cuEventRecord");
      launches[i % launches.size()](stream_);
      cuda::check(api.cuEventRecord(ends[i], stream_), "cuEventRecord");
    }
    cuda::check(api.cuStreamSynchronize(stream_), "cuStreamSynchronize (timed launches)");
    std::vector<double> microseconds;
    for (int r = 0; r < repetitions; ++r) {
      const auto i = static_cast<std::size_t>(r);
      float milliseconds = 0.0f;
      cuda::check(api.cuEventElapsedTime(&milliseconds, starts[i], ends[i]), "cuEventElapsedTime");
      microseconds.push_back(static_cast<double>(milliseconds) * 1000.0);
      api.cuEventDestroy(starts[i]);
      api.cuEventDestroy(ends[i]);
    }
    std::sort(microseconds.begin(), microseconds.end());
    Measurement result;
    result.repetitions = repetitions;
    result.min_us = microseconds.front();
    const std::size_t middle = microseconds.size() / 2;
    result.median_us = microseconds.size() % 2 == 1
                           ? microseconds[middle]
                           : 0.5 * (microseconds[middle - 1] + microseconds[middle]);
    return result;
  }

 private:
  cuda::Stream stream_;
  double clock_khz_;
  SpinKernel spin_;
};

// --- Cases -----------------------------------------------------------------------------------

struct Case {
  std::string kernel;
  std::string size;
  std::int64_t tokens = 0;          // tokens of the call (gathered rows for dequant_gather)
  std::int64_t active_tokens = -1;  // compressors: tokens that write a row
  std::int64_t bytes = 0;
  std::string formula;
  std::int64_t written_bytes = 0;  // what the outputs must receive
  // A gather of 4-byte values still moves whole 32-byte DRAM sectors: where that makes the
  // memory's share larger than `bytes`, the bytes at sector granularity (else 0).
  std::int64_t sector_bytes = 0;
  std::vector<DeviceSet> sets;
  std::vector<Launch> launches;  // launches[i] runs on sets[i]
};

struct Context {
  std::int64_t l2_bytes = 50 << 20;
  // No GPU: host memory stands in for device memory, and each case runs its kernel's plan
  // (argument validation) and CPU reference once instead of timed launches.
  bool dry_run = false;
  std::string compile_arch;  // dry run: compile each planned key for this arch (NVRTC)
};

int input_sets_for(const Context& context, std::int64_t bytes, std::int64_t allocated) {
  const std::int64_t wanted =
      (kColdFootprintInL2s * context.l2_bytes + std::max<std::int64_t>(bytes, 1) - 1) /
      std::max<std::int64_t>(bytes, 1);
  const std::int64_t affordable =
      std::max<std::int64_t>(1, kMaxSetBytes / std::max<std::int64_t>(allocated, 1));
  return static_cast<int>(std::clamp<std::int64_t>(std::min(wanted, affordable), 1, kMaxInputSets));
}

// What a dry run does with one input set.
struct Emulation {
  bool reference = false;    // run the CPU reference (the first set)
  std::string compile_arch;  // also compile the planned key for this arch (empty: do not)
};

// Uploads the first input set with make(set) -> Args, copies it as many times as the case's
// bytes ask for, and makes one launch per set: run(args, stream) launches the kernel. In a dry
// run, emulate(args, emulation) validates the arguments with the kernel's plan and, for the
// first set, compiles the planned key and runs the CPU reference on the planned argument block.
template <class MakeArgs, class Run, class Emulate>
void add_input_sets(Case& c, const Context& context, MakeArgs make, Run run, Emulate emulate) {
  c.sets.emplace_back(context.dry_run);
  std::vector<decltype(make(c.sets.front()))> args;
  args.push_back(make(c.sets.front()));
  // A dry run needs one replica to check that the copies plan like the original.
  const int count = std::min(context.dry_run ? 2 : kMaxInputSets,
                             input_sets_for(context, c.bytes, c.sets.front().allocated_bytes()));
  for (int i = 1; i < count; ++i) c.sets.push_back(c.sets.front().replicate());
  for (std::size_t i = 1; i < c.sets.size(); ++i) args.push_back(make(c.sets[i]));
  // The uploads and copies ran on the legacy stream and may still be in flight (a pageable
  // upload returns once staged; a device copy does not wait): the timing stream, created
  // non-blocking, would not wait for them.
  if (!context.dry_run) cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (context.dry_run) {
      Emulation emulation;
      emulation.reference = i == 0;
      if (i == 0) emulation.compile_arch = context.compile_arch;
      c.launches.push_back(
          [a = args[i], emulate, emulation](cuda::Stream) { emulate(a, emulation); });
    } else {
      c.launches.push_back([a = args[i], run](cuda::Stream stream) { run(a, stream); });
    }
  }
}

// The argument block a plan packed (each DSv4 kernel takes exactly one).
template <class Params, class Spec>
Params unpack(const Spec& spec) {
  if (spec.args.count() != 1 || spec.args.size(0) != sizeof(Params)) {
    throw std::logic_error("the plan did not pack one argument block of the expected size");
  }
  Params params;
  std::memcpy(&params, spec.args.data(0), sizeof params);
  return params;
}

// The dry run's part of one launch, given its plan's spec: compile the planned key when asked,
// then (first set only) run `reference(block, key)` on the argument block the plan packed.
template <class Params, class Kernel, class Spec, class Reference>
void emulate_planned(Kernel& kernel, const Spec& spec, const Emulation& emulation,
                     Reference reference) {
  if (!emulation.compile_arch.empty()) kernel.compile(spec.key, emulation.compile_arch);
  if (emulation.reference) reference(unpack<Params>(spec), spec.key);
}

// run(args, stream) of the compressor cases whose kernel is a plain / full-row pair.
template <class Plain, class Full, class Args>
auto run_plain_or_full(bool full) {
  return [full](const Args& args, cuda::Stream stream) {
    if (full) {
      Full::instance()(args, stream);
    } else {
      Plain::instance()(args, stream);
    }
  };
}

ref::NormWeightType norm_type(DType dtype) {
  return dtype == DType::f32 ? ref::NormWeightType::kFloat32 : ref::NormWeightType::kBFloat16;
}

std::uint64_t seed_of(std::string_view kernel, std::string_view size) {
  std::uint64_t seed = 0xC0FFEEull;
  for (char ch : kernel) seed = seed * 131 + static_cast<unsigned char>(ch);
  for (char ch : size) seed = seed * 131 + static_cast<unsigned char>(ch);
  return seed;
}

// --- Indexer-Q (spec 1) ----------------------------------------------------------------------
//
// bytes = T * (H*D*2 [q bf16] + H*2 [weights bf16] + 8 [position] + R*4 [its f32 cos/sin row]
//              + outputs)
//   FP8:   outputs = H*D [q_fp8] + H*4 [weights_out f32]                      -> T * 25224
//   MXFP4: outputs = H*D/2 [q_packed] + H*D/32 [q_scale] + H*4 [weights_out]  -> T * 21384

constexpr std::int64_t kIndexerMaxPosition = 65536;

struct TokenSize {
  std::int64_t tokens;
  std::int64_t chunk;  // prefill chunk length; 0 = decode (one token per request)
};

TokenSize indexer_size(std::string_view size) {
  if (size == "small") return {32, 0};
  if (size == "serving") return {8192, 2048};
  return {65536, 2048};
}

ref::IndexerQShape indexer_shape() {
  return {static_cast<int>(kIndexHeadDim), static_cast<int>(kRopeDim),
          static_cast<int>(kIndexHeads), false};
}

Case indexer_case(bool mxfp4, const std::string& size, const Context& context) {
  Case c;
  c.kernel = mxfp4 ? "indexer_q_mxfp4" : "indexer_q_fp8";
  c.size = size;
  const TokenSize shape = indexer_size(size);
  const std::int64_t tokens = shape.tokens;
  in::Random random(seed_of(c.kernel, size));
  in::IndexerQInputsHost host =
      in::make_indexer_q_inputs(random, tokens, kIndexHeads, kIndexHeadDim, kRopeDim, DType::f32,
                                kRopeDim, kIndexerMaxPosition);
  if (shape.chunk > 0) {  // prefill: consecutive positions per request
    for (std::int64_t first = 0; first < tokens; first += shape.chunk) {
      const std::int64_t start = random.uniform_int(0, kIndexerMaxPosition - shape.chunk);
      for (std::int64_t i = 0; i < shape.chunk && first + i < tokens; ++i) {
        host.positions.set<std::int64_t>(first + i, start + i);
      }
    }
  }
  const std::int64_t input_bytes =
      kIndexHeads * kIndexHeadDim * 2 + kIndexHeads * 2 + 8 + kCosSinRowBytes;
  const std::int64_t output_bytes =
      mxfp4 ? kIndexHeads * kIndexHeadDim / 2 + kIndexHeads * kIndexHeadDim / 32 + kIndexHeads * 4
            : kIndexHeads * kIndexHeadDim + kIndexHeads * 4;
  c.tokens = tokens;
  c.bytes = tokens * (input_bytes + output_bytes);
  c.written_bytes = tokens * output_bytes;
  c.formula = mxfp4 ? "T*(H*D*2 q + H*2 weights + 8 position + R*4 cos/sin + H*D/2 q_packed + "
                      "H*D/32 q_scale + H*4 weights_out) = T*21384"
                    : "T*(H*D*2 q + H*2 weights + 8 position + R*4 cos/sin + H*D q_fp8 + "
                      "H*4 weights_out) = T*25224";

  const in::HostTensor weights_out = in::make_tensor(DType::f32, {tokens, kIndexHeads});
  auto inputs = [&host](DeviceSet& set) {
    dsv4::IndexerQInputs a;
    a.positions = set.put(host.positions);
    a.q = set.put(host.q);
    a.cos_sin_cache = set.put(host.cos_sin_cache);
    a.weights = set.put(host.weights);
    a.scale = host.scale;
    return a;
  };
  if (mxfp4) {
    const in::HostTensor packed =
        in::make_tensor(DType::u8, {tokens, kIndexHeads, kIndexHeadDim / 2});
    const in::HostTensor scales =
        in::make_tensor(DType::u8, {tokens, kIndexHeads, kIndexHeadDim / 32});
    add_input_sets(
        c, context,
        [&](DeviceSet& set) {
          dsv4::IndexerQInputs a = inputs(set);
          dsv4::IndexerQMxFp4Outputs o{set.put(packed, true), set.put(scales, true),
                                       set.put(weights_out, true)};
          return std::pair{a, o};
        },
        [](const auto& args, cuda::Stream stream) {
          dsv4::IndexerQMxFp4Kernel::instance()(args.first, args.second, stream);
        },
        [](const auto& args, const Emulation& e) {
          auto& kernel = dsv4::IndexerQMxFp4Kernel::instance();
          emulate_planned<params::IndexerQParams>(
              kernel, kernel.plan(args.first, args.second), e,
              [](const auto& block, const auto&) { ref::indexer_q_mxfp4(block, indexer_shape()); });
        });
  } else {
    const in::HostTensor q_fp8 = in::make_tensor(DType::u8, {tokens, kIndexHeads, kIndexHeadDim});
    add_input_sets(
        c, context,
        [&](DeviceSet& set) {
          dsv4::IndexerQInputs a = inputs(set);
          dsv4::IndexerQFp8Outputs o{set.put(q_fp8, true), set.put(weights_out, true)};
          return std::pair{a, o};
        },
        [](const auto& args, cuda::Stream stream) {
          dsv4::IndexerQFp8Kernel::instance()(args.first, args.second, stream);
        },
        [](const auto& args, const Emulation& e) {
          auto& kernel = dsv4::IndexerQFp8Kernel::instance();
          emulate_planned<params::IndexerQParams>(
              kernel, kernel.plan(args.first, args.second), e,
              [](const auto& block, const auto&) { ref::indexer_q_fp8(block, indexer_shape()); });
        });
  }
  return c;
}

// --- Dequantize + gather (spec 2) ------------------------------------------------------------
//
// The compressed C4 cache's call: B = 64 rows a page (block 256 / 4), page stride
// round_up(64 * 584, 576) = 37440, no gather_lens (G = L), offset 0; each request gathers L_r
// rows (7/8 .. 1 of the size's row count) from pages in permuted order.
// bytes = sum_r L_r * (576 data + 8 scales + 512*2 out) + sum_r ceil(L_r/64)*4 [block table]
//         + R*4 [seq_lens]

constexpr std::int64_t kGatherBlockSize = 64;

struct GatherSize {
  std::int64_t requests;
  std::int64_t rows;
};

GatherSize gather_size(std::string_view size) {
  if (size == "small") return {2, 32};
  if (size == "serving") return {2, 4096};
  return {64, 4096};
}

Case dequant_gather_case(const std::string& size, const Context& context) {
  Case c;
  c.kernel = "dequant_gather";
  c.size = size;
  const GatherSize shape = gather_size(size);
  in::Random random(seed_of(c.kernel, size));
  std::vector<std::int32_t> lengths;
  std::vector<std::int64_t> first_column, last_column;
  std::int64_t rows = 0, pages = 0, max_length = 0, max_pages = 0;
  for (std::int64_t r = 0; r < shape.requests; ++r) {
    const std::int64_t length = random.uniform_int(shape.rows - shape.rows / 8, shape.rows);
    const std::int64_t request_pages = (length + kGatherBlockSize - 1) / kGatherBlockSize;
    lengths.push_back(static_cast<std::int32_t>(length));
    first_column.push_back(0);
    last_column.push_back(request_pages - 1);
    rows += length;
    pages += request_pages;
    max_length = std::max(max_length, length);
    max_pages = std::max(max_pages, request_pages);
  }
  const std::int64_t page_stride = in::default_page_stride(kGatherBlockSize);
  const std::int64_t num_pages = pages + 4;  // a few pages no request uses
  in::HostTensor cache = in::make_ds_mla_cache(num_pages, kGatherBlockSize, page_stride);
  in::fill_ds_mla_cache(random, cache, 105, 140);
  const in::HostTensor block_table =
      in::permuted_block_table(random, max_pages + 2, first_column, last_column, num_pages);
  const in::HostTensor seq_lens = in::tensor_of(std::span<const std::int32_t>(lengths));
  const in::HostTensor out = in::make_tensor(DType::bf16, {shape.requests, max_length, kHeadSize});

  c.tokens = rows;
  c.bytes = rows * (576 + 8 + kHeadSize * 2) + pages * 4 + shape.requests * 4;
  c.written_bytes = rows * kHeadSize * 2;
  c.formula = "rows*(576 data + 8 scales + 1024 out) + pages*4 block_table + requests*4 seq_lens";
  add_input_sets(
      c, context,
      [&](DeviceSet& set) {
        dsv4::DequantGatherArgs a;
        a.out = set.put(out, true);
        a.k_cache = set.put(cache);
        a.seq_lens = set.put(seq_lens);
        a.block_table = set.put(block_table);
        a.offset = 0;
        return a;
      },
      [](const dsv4::DequantGatherArgs& args, cuda::Stream stream) {
        dsv4::DequantGatherKernel::instance()(args, stream);
      },
      [](const dsv4::DequantGatherArgs& args, const Emulation& e) {
        auto& kernel = dsv4::DequantGatherKernel::instance();
        emulate_planned<params::DequantGatherParams>(
            kernel, kernel.plan(args), e, [](const auto& block, const auto& key) {
              ref::dequant_gather(block, key.block_size, key.has_gather_lens);
            });
      });
  return c;
}

// --- Compressor batches ----------------------------------------------------------------------

// Requests of one compressor call: decode steps (one token each, every `ratio`-th of them on a
// boundary, at least one) or prefill chunks of `chunk` consecutive positions.
std::vector<in::RequestChunk> compressor_requests(in::Random& random, std::int64_t tokens,
                                                  std::int64_t chunk, int ratio) {
  std::vector<in::RequestChunk> requests;
  constexpr std::int64_t kMaxFirstPosition = 60000;
  if (chunk == 0) {
    const std::int64_t boundaries = std::max<std::int64_t>(1, tokens / ratio);
    for (std::int64_t r = 0; r < tokens; ++r) {
      std::int64_t position = random.uniform_int(ratio * 2, kMaxFirstPosition);
      if (r < boundaries) position = position / ratio * ratio + ratio - 1;
      requests.push_back({position, 1});
    }
    return requests;
  }
  for (std::int64_t first = 0; first < tokens; first += chunk) {
    requests.push_back({random.uniform_int(0, kMaxFirstPosition), std::min(chunk, tokens - first)});
  }
  return requests;
}

struct CompressorMetadata {
  in::CompressorTokens tokens;
  in::HostTensor token_to_req, positions, slot_mapping, kv_slot_mapping, cos_sin;
  std::int64_t boundaries = 0;
};

CompressorMetadata compressor_metadata(in::Random& random,
                                       const std::vector<in::RequestChunk>& requests, int ratio,
                                       std::int64_t kv_slots) {
  CompressorMetadata m;
  m.boundaries = in::count_boundaries(requests, ratio);
  m.tokens = in::make_compressor_tokens(random, requests, ratio, kv_slots, 0.01);
  std::int64_t max_position = 0;
  for (std::int64_t p : m.tokens.positions) max_position = std::max(max_position, p);
  m.token_to_req = in::tensor_of(std::span<const std::int32_t>(m.tokens.token_to_req));
  m.positions = in::tensor_of(std::span<const std::int64_t>(m.tokens.positions));
  m.slot_mapping = in::tensor_of(std::span<const std::int64_t>(m.tokens.slot_mapping));
  m.kv_slot_mapping = in::tensor_of(std::span<const std::int64_t>(m.tokens.kv_slot_mapping));
  m.cos_sin = in::random_cos_sin(random, max_position + 1, kRopeDim, kRopeDim, DType::f32);
  return m;
}

TokenSize compressor_size(std::string_view kernel, std::string_view size) {
  const bool c4 = kernel.starts_with("c4");
  const bool c128_store = kernel.starts_with("c128_store");
  if (size == "small") return {c4 ? 32 : 64, 0};
  if (size == "serving") return {8192, 2048};
  if (c4) return {65536, 2048};
  return {c128_store ? 262144 : 131072, 4096};
}

// A compressed K cache: fp8_ds_mla pages of B rows (default page stride) or full BF16 rows.
in::HostTensor k_cache(bool full, std::int64_t pages, std::int64_t block_size) {
  if (full) return in::make_tensor(DType::bf16, {pages, block_size, kHeadSize}, {}, 0);
  return in::make_ds_mla_cache(pages, block_size, in::default_page_stride(block_size));
}

// --- C4 compress + norm + RoPE + store (spec 3, 4) -------------------------------------------
//
// State Bs = 4, compressed cache B = 64 (block 256 / 4). A token is active iff slot >= 0,
// kv_slot >= 0 and (p + 1) % 4 == 0. An active token pools rows p-7..p (those with pos >= 0),
// reading 512 kv + 512 score floats of each: consecutive boundaries read the other halves of
// the rows they share, so each state row's bytes are read once.
// bytes = T*28 [slot 8, position 8, token_to_req 4, kv_slot 8] + 1024 [norm weight bf16]
//         + sum_active (rows*4096 + blocks*4 [block table] + 256 [cos/sin row] + row_out)
//   row_out = 584 (fp8_ds_mla: 576 data + 8 scales) or 1024 (full bf16 row)

Case c4_case(bool full, const std::string& size, const Context& context) {
  Case c;
  c.kernel = full ? "c4_store_full" : "c4_store";
  c.size = size;
  const TokenSize shape = compressor_size(c.kernel, size);
  in::Random random(seed_of(c.kernel, size));
  const std::vector<in::RequestChunk> requests =
      compressor_requests(random, shape.tokens, shape.chunk, 4);
  constexpr std::int64_t kStateBlock = 4;
  constexpr std::int64_t kCacheBlock = 64;
  const std::int64_t pages =
      (in::count_boundaries(requests, 4) + kCacheBlock - 1) / kCacheBlock + 2;
  const CompressorMetadata m = compressor_metadata(random, requests, 4, pages * kCacheBlock);
  const in::CompressorState state =
      in::make_compressor_state(random, requests, kStateBlock, 1024, 8, 0, 0, 1);
  const in::HostTensor weight = in::random_norm_weight(random, DType::bf16);
  const in::HostTensor cache = k_cache(full, pages, kCacheBlock);

  const std::int64_t row_out = full ? kFullBf16RowBytes : kDsMlaRowBytes;
  const auto tokens = static_cast<std::int64_t>(m.tokens.positions.size());
  std::int64_t active = 0, state_bytes = 0, table_bytes = 0;
  for (std::size_t t = 0; t < m.tokens.positions.size(); ++t) {
    const std::int64_t p = m.tokens.positions[t];
    if (m.tokens.slot_mapping[t] < 0 || m.tokens.kv_slot_mapping[t] < 0 || p < 0 ||
        (p + 1) % 4 != 0) {
      continue;
    }
    ++active;
    const std::int64_t first = std::max<std::int64_t>(0, p - 7);
    state_bytes += (p - first + 1) * 4096;
    table_bytes += (p / kStateBlock - first / kStateBlock + 1) * 4;
  }
  c.tokens = tokens;
  c.active_tokens = active;
  c.bytes = tokens * 28 + kNormWeightBytes + state_bytes + table_bytes +
            active * (kCosSinRowBytes + row_out);
  c.written_bytes = active * row_out;
  c.formula = std::string(
                  "T*28 metadata + 1024 norm weight + active*(rows*4096 state + blocks*4 "
                  "block_table + 256 cos/sin + ") +
              (full ? "1024 bf16 row)" : "584 ds_mla row)");
  add_input_sets(
      c, context,
      [&](DeviceSet& set) {
        dsv4::C4StoreArgs a;
        a.compress_ratio = 4;
        a.state_cache = set.put(state.state);
        a.token_to_req = set.put(m.token_to_req);
        a.positions = set.put(m.positions);
        a.slot_mapping = set.put(m.slot_mapping);
        a.block_table = set.put(state.block_table);
        a.rms_norm_weight = set.put(weight);
        a.eps = 1e-6f;
        a.cos_sin_cache = set.put(m.cos_sin);
        a.k_cache = set.put(cache, true);
        a.kv_slot_mapping = set.put(m.kv_slot_mapping);
        return a;
      },
      run_plain_or_full<dsv4::C4StoreKernel, dsv4::C4StoreFullKernel, dsv4::C4StoreArgs>(full),
      [full](const dsv4::C4StoreArgs& args, const Emulation& e) {
        if (full) {
          auto& kernel = dsv4::C4StoreFullKernel::instance();
          emulate_planned<params::C4StoreFullParams>(
              kernel, kernel.plan(args), e, [](const auto& block, const auto& key) {
                ref::c4_store_full(block, {key.store_full_fp8, norm_type(key.norm_weight_dtype)});
              });
        } else {
          auto& kernel = dsv4::C4StoreKernel::instance();
          emulate_planned<params::C4StoreParams>(
              kernel, kernel.plan(args), e, [](const auto& block, const auto& key) {
                ref::c4_store(block, {norm_type(key.norm_weight_dtype)});
              });
        }
      });
  return c;
}

// --- C128 compress (spec 5) ------------------------------------------------------------------
//
// State Bs = 8. A token is active iff slot >= 0 and (p + 1) % 128 == 0; it pools rows
// p-127..p (512 kv + 512 score floats each; boundaries never share rows).
// bytes = T*20 [slot 8, position 8, token_to_req 4]
//         + active*(128*4096 [state rows] + 16*4 [block table] + 2048 [compressed_kv row f32])

Case c128_compress_case(const std::string& size, const Context& context) {
  Case c;
  c.kernel = "c128_compress";
  c.size = size;
  const TokenSize shape = compressor_size(c.kernel, size);
  in::Random random(seed_of(c.kernel, size));
  const std::vector<in::RequestChunk> requests =
      compressor_requests(random, shape.tokens, shape.chunk, 128);
  const CompressorMetadata m =
      compressor_metadata(random, requests, 128, in::count_boundaries(requests, 128) + 1);
  const in::CompressorState state =
      in::make_compressor_state(random, requests, 8, 512, 128, 0, 0, 1);
  const auto tokens = static_cast<std::int64_t>(m.tokens.positions.size());
  const in::HostTensor compressed = in::make_tensor(DType::f32, {tokens, kHeadSize});

  std::int64_t active = 0;
  for (std::size_t t = 0; t < m.tokens.positions.size(); ++t) {
    const std::int64_t p = m.tokens.positions[t];
    if (m.tokens.slot_mapping[t] >= 0 && p >= 0 && (p + 1) % 128 == 0) ++active;
  }
  c.tokens = tokens;
  c.active_tokens = active;
  c.bytes = tokens * 20 + active * (128 * 4096 + 16 * 4 + kHeadSize * 4);
  c.written_bytes = active * kHeadSize * 4;
  c.formula = "T*20 metadata + active*(128*4096 state + 16*4 block_table + 2048 compressed_kv)";
  add_input_sets(
      c, context,
      [&](DeviceSet& set) {
        dsv4::C128CompressArgs a;
        a.state_cache = set.put(state.state);
        a.token_to_req = set.put(m.token_to_req);
        a.positions = set.put(m.positions);
        a.slot_mapping = set.put(m.slot_mapping);
        a.block_table = set.put(state.block_table);
        a.compressed_kv = set.put(compressed, true);
        return a;
      },
      [](const dsv4::C128CompressArgs& args, cuda::Stream stream) {
        dsv4::C128CompressKernel::instance()(args, stream);
      },
      [](const dsv4::C128CompressArgs& args, const Emulation& e) {
        auto& kernel = dsv4::C128CompressKernel::instance();
        emulate_planned<params::C128CompressParams>(
            kernel, kernel.plan(args), e,
            [](const auto& block, const auto& key) { ref::c128_compress(block, {key.head_size}); });
      });
  return c;
}

// --- C128 norm + RoPE + store (spec 6, 7) ----------------------------------------------------
//
// Compressed cache B_k = 2 (block 256 / 128), page stride 1728. A token is active iff
// slot >= 0, kv_slot >= 0 and (p + 1) % 128 == 0; only active rows of compressed_kv are read
// (the others are never touched and hold the sentinel).
// bytes = T*24 [slot 8, position 8, kv_slot 8] + 1024 [norm weight bf16]
//         + active*(2048 [compressed_kv row] + 256 [cos/sin row] + row_out)
//   row_out = 584 (fp8_ds_mla) or 1024 (full bf16)

Case c128_store_case(bool full, const std::string& size, const Context& context) {
  Case c;
  c.kernel = full ? "c128_store_full" : "c128_store";
  c.size = size;
  const TokenSize shape = compressor_size(c.kernel, size);
  in::Random random(seed_of(c.kernel, size));
  // "dense" and "dense_large": every token a boundary (one-token chunks at positions
  // 128k - 1), 65536 and 262144 tokens (189 and 755 MB, the latter the byte volume of the
  // other kernels' large sizes). Real batches hold one boundary per 128 tokens, which leaves
  // the stores a few MB even at 262144 tokens; these sizes show the kernel's own bandwidth.
  std::vector<in::RequestChunk> requests;
  if (size.starts_with("dense")) {
    const std::int64_t boundaries = size == "dense" ? 65536 : 262144;
    for (std::int64_t i = 0; i < boundaries; ++i) requests.push_back({128 * (i + 1) - 1, 1});
  } else {
    requests = compressor_requests(random, shape.tokens, shape.chunk, 128);
  }
  constexpr std::int64_t kCacheBlock = 2;
  const std::int64_t pages =
      (in::count_boundaries(requests, 128) + kCacheBlock - 1) / kCacheBlock + 2;
  const CompressorMetadata m = compressor_metadata(random, requests, 128, pages * kCacheBlock);
  const auto tokens = static_cast<std::int64_t>(m.tokens.positions.size());
  in::HostTensor compressed = in::make_tensor(DType::f32, {tokens, kHeadSize});
  std::int64_t active = 0;
  for (std::size_t t = 0; t < m.tokens.positions.size(); ++t) {
    const std::int64_t p = m.tokens.positions[t];
    if (m.tokens.slot_mapping[t] < 0 || m.tokens.kv_slot_mapping[t] < 0 || p < 0 ||
        (p + 1) % 128 != 0) {
      continue;
    }
    ++active;
    // Pooled rows of many magnitudes, so that the scale exponents vary.
    const float magnitude = std::ldexp(1.0f, static_cast<int>(random.uniform_int(-8, 8)));
    for (std::int64_t e = 0; e < kHeadSize; ++e) {
      compressed.set<float>(static_cast<std::int64_t>(t) * kHeadSize + e,
                            random.uniform(-2.0f, 2.0f) * magnitude);
    }
  }
  const in::HostTensor weight = in::random_norm_weight(random, DType::bf16);
  const in::HostTensor cache = k_cache(full, pages, kCacheBlock);

  const std::int64_t row_out = full ? kFullBf16RowBytes : kDsMlaRowBytes;
  c.tokens = tokens;
  c.active_tokens = active;
  c.bytes = tokens * 24 + kNormWeightBytes + active * (kHeadSize * 4 + kCosSinRowBytes + row_out);
  c.written_bytes = active * row_out;
  c.formula = std::string(
                  "T*24 metadata + 1024 norm weight + active*(2048 compressed_kv + 256 "
                  "cos/sin + ") +
              (full ? "1024 bf16 row)" : "584 ds_mla row)");
  add_input_sets(
      c, context,
      [&](DeviceSet& set) {
        dsv4::C128StoreArgs a;
        a.compressed_kv = set.put(compressed);
        a.positions = set.put(m.positions);
        a.slot_mapping = set.put(m.slot_mapping);
        a.rms_norm_weight = set.put(weight);
        a.eps = 1e-6f;
        a.cos_sin_cache = set.put(m.cos_sin);
        a.k_cache = set.put(cache, true);
        a.kv_slot_mapping = set.put(m.kv_slot_mapping);
        return a;
      },
      run_plain_or_full<dsv4::C128StoreKernel, dsv4::C128StoreFullKernel, dsv4::C128StoreArgs>(
          full),
      [full](const dsv4::C128StoreArgs& args, const Emulation& e) {
        if (full) {
          auto& kernel = dsv4::C128StoreFullKernel::instance();
          emulate_planned<params::C128StoreFullParams>(
              kernel, kernel.plan(args), e, [](const auto& block, const auto& key) {
                ref::c128_store_full(block, {key.store_full_fp8, norm_type(key.norm_weight_dtype)});
              });
        } else {
          auto& kernel = dsv4::C128StoreKernel::instance();
          emulate_planned<params::C128StoreParams>(
              kernel, kernel.plan(args), e, [](const auto& block, const auto& key) {
                ref::c128_store(block, {key.kv_cache_block_size, key.kv_block_stride,
                                        norm_type(key.norm_weight_dtype)});
              });
        }
      });
  return c;
}

// --- DCP top-k candidate packing (spec 12) ---------------------------------------------------
//
// DSv4-Flash top-k 512, DCP world size 2, interleave 1, rank 1. Decode rows have no row starts
// and index the whole local width N; prefill rows (serving, large) belong to 2-4 requests whose
// columns start at row_starts and span N / requests. Each row holds distinct local indices in
// random order; 3 % of the rows have fewer candidates than 512 and pad with -1.
// bytes = sum_rows (K*(4 [index] + 8 [packed pair]) + valid*4 [gathered logit])
//         + R*4 [row_starts, prefill]

struct DcpSize {
  std::int64_t rows;
  std::int64_t width;     // N
  std::int64_t requests;  // 0 = decode (no row starts)
};

DcpSize dcp_size(std::string_view size) {
  if (size == "small") return {32, 16384, 0};
  if (size == "serving") return {8192, 8192, 4};
  return {65536, 2048, 2};
}

constexpr int kDcpTopK = 512;
constexpr int kDcpWorldSize = 2;
constexpr int kDcpRank = 1;

Case dcp_case(const std::string& size, const Context& context) {
  Case c;
  c.kernel = "dcp_pack";
  c.size = size;
  const DcpSize shape = dcp_size(size);
  in::Random random(seed_of(c.kernel, size));
  const std::int64_t rows = shape.rows;
  in::HostTensor logits = in::make_tensor(DType::f32, {rows, shape.width});
  in::HostTensor indices = in::make_tensor(DType::i32, {rows, kDcpTopK});
  std::vector<std::int32_t> starts(static_cast<std::size_t>(rows), 0);
  const std::int64_t span = shape.requests > 0 ? shape.width / shape.requests : shape.width;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (shape.requests > 0)
      starts[static_cast<std::size_t>(r)] =
          static_cast<std::int32_t>(r * shape.requests / rows * span);
  }
  // Rows in chunks, each from its own generator, filled in parallel.
  constexpr std::int64_t kRowsPerChunk = 256;
  const std::int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  std::vector<std::uint64_t> seeds(static_cast<std::size_t>(chunks));
  for (auto& seed : seeds) seed = random.next();
  std::vector<std::int64_t> valid_per_chunk(static_cast<std::size_t>(chunks), 0);
  std::vector<std::int64_t> sectors_per_chunk(static_cast<std::size_t>(chunks), 0);
  float* logit_values = logits.as<float>();
  std::int32_t* index_values = indices.as<std::int32_t>();
  zerojit::parallel_for(static_cast<std::size_t>(chunks), 0, [&](std::size_t chunk) {
    in::Random chunk_random(seeds[chunk]);
    std::vector<std::int32_t> pool(static_cast<std::size_t>(span));
    std::vector<bool> sector_touched(static_cast<std::size_t>((shape.width + 7) / 8));
    const std::int64_t first = static_cast<std::int64_t>(chunk) * kRowsPerChunk;
    for (std::int64_t r = first; r < std::min(rows, first + kRowsPerChunk); ++r) {
      for (std::int64_t col = 0; col < shape.width; ++col) {
        logit_values[r * shape.width + col] = in::random_logit(chunk_random, 0.001, 0.0005);
      }
      std::int64_t valid = std::min<std::int64_t>(kDcpTopK, span);
      if (chunk_random.chance(0.03)) valid = chunk_random.uniform_int(0, valid - 1);
      std::iota(pool.begin(), pool.end(), 0);
      for (std::int64_t k = 0; k < kDcpTopK; ++k) {
        std::int32_t value = -1;
        if (k < valid) {  // a partial shuffle: distinct local positions
          const auto j = static_cast<std::size_t>(chunk_random.uniform_int(k, span - 1));
          std::swap(pool[static_cast<std::size_t>(k)], pool[j]);
          value = pool[static_cast<std::size_t>(k)];
        }
        index_values[r * kDcpTopK + k] = value;
      }
      valid_per_chunk[chunk] += valid;
      // Rows are 8 KB or more apart and each tensor is 256-byte aligned, so the row's 32-byte
      // sectors are its columns / 8.
      std::fill(sector_touched.begin(), sector_touched.end(), false);
      for (std::int64_t k = 0; k < valid; ++k) {
        const std::int64_t column =
            starts[static_cast<std::size_t>(r)] + index_values[r * kDcpTopK + k];
        const auto sector = static_cast<std::size_t>(column / 8);
        sectors_per_chunk[chunk] += sector_touched[sector] ? 0 : 1;
        sector_touched[sector] = true;
      }
    }
  });
  const std::int64_t valid =
      std::accumulate(valid_per_chunk.begin(), valid_per_chunk.end(), std::int64_t{0});
  const in::HostTensor row_starts = in::tensor_of(std::span<const std::int32_t>(starts));
  const in::HostTensor packed = in::make_tensor(DType::f32, {rows, kDcpTopK, 2});

  const bool prefill = shape.requests > 0;
  c.tokens = rows;
  c.bytes = rows * kDcpTopK * (4 + 8) + valid * 4 + (prefill ? rows * 4 : 0);
  c.written_bytes = rows * kDcpTopK * 8;
  const std::int64_t sectors =
      std::accumulate(sectors_per_chunk.begin(), sectors_per_chunk.end(), std::int64_t{0});
  c.sector_bytes = c.bytes - valid * 4 + sectors * 32;
  c.formula = std::string("R*K*(4 index + 8 packed) + valid*4 logits") +
              (prefill ? " + R*4 row_starts" : "");
  add_input_sets(
      c, context,
      [&](DeviceSet& set) {
        dsv4::DcpPackArgs a;
        a.logits = set.put(logits);
        a.topk_indices = set.put(indices);
        if (prefill) a.row_starts = set.put(row_starts);
        a.packed = set.put(packed, true);
        a.dcp_rank = kDcpRank;
        a.dcp_world_size = kDcpWorldSize;
        a.cp_interleave = 1;
        return a;
      },
      [](const dsv4::DcpPackArgs& args, cuda::Stream stream) {
        dsv4::DcpPackKernel::instance()(args, stream);
      },
      [](const dsv4::DcpPackArgs& args, const Emulation& e) {
        auto& kernel = dsv4::DcpPackKernel::instance();
        emulate_planned<params::DcpPackParams>(
            kernel, kernel.plan(args), e, [](const auto& block, const auto& key) {
              ref::dcp_pack(block,
                            {key.topk, key.has_row_starts, key.dcp_world_size, key.cp_interleave});
            });
      });
  return c;
}

// An empty Case (no kernel) for a size the kernel does not have: callers skip it.
Case make_case(const std::string& kernel, const std::string& size, const Context& context) {
  if (size.starts_with("dense") && !kernel.starts_with("c128_store")) return {};
  if (kernel == "indexer_q_fp8") return indexer_case(false, size, context);
  if (kernel == "indexer_q_mxfp4") return indexer_case(true, size, context);
  if (kernel == "dequant_gather") return dequant_gather_case(size, context);
  if (kernel == "c4_store") return c4_case(false, size, context);
  if (kernel == "c4_store_full") return c4_case(true, size, context);
  if (kernel == "c128_compress") return c128_compress_case(size, context);
  if (kernel == "c128_store") return c128_store_case(false, size, context);
  if (kernel == "c128_store_full") return c128_store_case(true, size, context);
  return dcp_case(size, context);
}

// --- Output ----------------------------------------------------------------------------------

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

std::vector<std::string> select(const std::string& option, const std::vector<std::string>& known,
                                const char* what) {
  if (option.empty() || option == "all") return known;
  std::vector<std::string> chosen;
  for (const std::string& item : split_list(option)) {
    if (std::find(known.begin(), known.end(), item) == known.end()) {
      std::string list;
      for (const std::string& name : known) list += (list.empty() ? "" : ", ") + name;
      throw std::invalid_argument(std::string("unknown ") + what + " '" + item +
                                  "' (known: " + list + ")");
    }
    chosen.push_back(item);
  }
  // Keep the canonical order.
  std::vector<std::string> ordered;
  for (const std::string& name : known) {
    if (std::find(chosen.begin(), chosen.end(), name) != chosen.end()) ordered.push_back(name);
  }
  return ordered;
}

double gigabytes_per_second(std::int64_t bytes, double microseconds) {
  return microseconds > 0.0 ? static_cast<double>(bytes) / (microseconds * 1e3) : 0.0;
}

// Without a GPU: builds every case in host memory, validates its arguments with the kernel's
// plan (every input set), runs the CPU reference on the first set and checks what it wrote
// against the case's byte count. Times nothing.
int dry_run(const std::vector<std::string>& kernels, const std::vector<std::string>& sizes,
            const std::string& compile_arch) {
  Context context;
  context.dry_run = true;
  std::printf("dry run: host memory, each kernel's plan and CPU reference; nothing is timed\n");
  if (compile_arch != "none") {
    if (zerojit::nvrtc_available()) {
      context.compile_arch = compile_arch;
      SpinKernel spin;
      spin.compile(SpinKey{}, compile_arch);
      std::printf("every planned key and the timing spin are compiled for %s\n",
                  compile_arch.c_str());
    } else {
      std::printf("no NVRTC (%s): keys not compiled\n",
                  zerojit::nvrtc_unavailable_reason().c_str());
    }
  }
  std::printf("%-16s %-8s %8s %7s %10s %4s %12s %12s %7s %7s\n", "kernel", "size", "tokens",
              "active", "MB", "sets", "to_write", "changed", "build_s", "ref_s");
  bool all_ok = true;
  for (const std::string& kernel : kernels) {
    for (const std::string& size : sizes) {
      const auto start = std::chrono::steady_clock::now();
      Case c = make_case(kernel, size, context);
      if (c.kernel.empty()) continue;
      const auto built = std::chrono::steady_clock::now();
      for (const Launch& launch : c.launches) launch(nullptr);
      const std::int64_t changed = c.sets.front().changed_output_bytes();
      const bool ok = changed <= c.written_bytes && changed * 10 >= c.written_bytes * 9;
      all_ok = all_ok && ok;
      const auto done = std::chrono::steady_clock::now();
      std::printf("%-16s %-8s %8lld %7s %10.3f %4zu %12lld %12lld %7.2f %7.2f%s\n",
                  c.kernel.c_str(), c.size.c_str(), static_cast<long long>(c.tokens),
                  c.active_tokens >= 0 ? std::to_string(c.active_tokens).c_str() : "-",
                  static_cast<double>(c.bytes) / 1e6, c.sets.size(),
                  static_cast<long long>(c.written_bytes), static_cast<long long>(changed),
                  std::chrono::duration<double>(built - start).count(),
                  std::chrono::duration<double>(done - built).count(),
                  ok ? "" : "  WRITE CHECK FAILED");
      if (c.sector_bytes > 0) {
        std::printf("%-16s %-8s %8s %7s %10.3f  (at 32-byte sector granularity)\n", "", "", "", "",
                    static_cast<double>(c.sector_bytes) / 1e6);
      }
      std::fflush(stdout);
    }
  }
  std::printf("dry run: %s\n", all_ok ? "every write check passed" : "SOME WRITE CHECKS FAILED");
  return all_ok ? 0 : 1;
}

int run(const std::string& json_path, const std::vector<std::string>& kernels,
        const std::vector<std::string>& sizes, int repetitions) {
  const auto wall_start = std::chrono::steady_clock::now();
  cuda::make_device_current(0);
  const cuda::DeviceInfo device = cuda::device_info(0);
  const auto& api = cuda::driver();
  cuda::DeviceHandle handle = 0;
  cuda::check(api.cuDeviceGet(&handle, 0), "cuDeviceGet");
  constexpr int kAttributeClockRate = 13;  // CU_DEVICE_ATTRIBUTE_CLOCK_RATE, kHz
  int clock_khz = 0;
  cuda::check(api.cuDeviceGetAttribute(&clock_khz, kAttributeClockRate, handle),
              "cuDeviceGetAttribute(CLOCK_RATE)");
  cuda::Stream stream = nullptr;
  cuda::check(api.cuStreamCreate(&stream, cuda::kStreamNonBlocking), "cuStreamCreate");
  Context context;
  if (device.l2_cache_bytes > 0) context.l2_bytes = device.l2_cache_bytes;
  std::printf("device: %s (sm_%d%d, %d SMs, L2 %.0f MB, SM clock %.0f MHz), %d repetitions\n",
              device.name.c_str(), device.compute_major, device.compute_minor,
              device.multiprocessors, static_cast<double>(context.l2_bytes) / 1e6, clock_khz / 1e3,
              repetitions);
  std::fflush(stdout);

  Timer timer(stream, clock_khz > 0 ? clock_khz : 2'000'000);

  // The roofline: one copy of 1 GiB (read + written), before and after the kernels.
  DeviceMemory copy_source(static_cast<std::size_t>(kCopyBytes), false);
  DeviceMemory copy_destination(static_cast<std::size_t>(kCopyBytes), false);
  cuda::check(api.cuMemsetD8(copy_source.address(), 0x5A, copy_source.bytes()), "cuMemsetD8");
  cuda::check(api.cuCtxSynchronize(), "cuCtxSynchronize");
  const std::vector<Launch> copy = {[&](cuda::Stream s) {
    cuda::check(api.cuMemcpyDtoDAsync(copy_destination.address(), copy_source.address(),
                                      copy_source.bytes(), s),
                "cuMemcpyDtoDAsync");
  }};
  const std::int64_t copy_bytes = 2 * kCopyBytes;
  const Measurement copy_before = timer.measure(copy, repetitions);

  struct Row {
    Case c;
    Measurement m;
    bool write_ok = true;
    std::int64_t changed = 0;
    int sets = 1;
  };
  std::vector<Row> rows;
  bool all_ok = true;
  bool device_failed = false;
  for (const std::string& kernel : kernels) {
    for (const std::string& size : sizes) {
      if (device_failed) break;
      Row row;
      const auto build_start = std::chrono::steady_clock::now();
      try {
        Case c = make_case(kernel, size, context);
        if (c.kernel.empty()) continue;
        const double build_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start).count();
        row.m = timer.measure(c.launches, repetitions);
        row.changed = c.sets.front().changed_output_bytes();
        row.write_ok = row.changed <= c.written_bytes && row.changed * 10 >= c.written_bytes * 9;
        row.sets = static_cast<int>(c.sets.size());
        std::printf("  %-16s %-8s built in %5.2f s, %2d input set(s), %9.2f us%s\n", kernel.c_str(),
                    size.c_str(), build_s, row.sets, row.m.median_us,
                    row.write_ok ? "" : "  WRITE CHECK FAILED");
        std::fflush(stdout);
        c.sets.clear();
        c.launches.clear();
        row.c = std::move(c);
      } catch (const std::exception& error) {
        // A failed driver call may leave the context unusable: the cases after it are
        // skipped, and what was measured is still reported.
        device_failed = dynamic_cast<const zerojit::CudaError*>(&error) != nullptr;
        std::printf("  %-16s %-8s FAILED: %s%s\n", kernel.c_str(), size.c_str(), error.what(),
                    device_failed ? " (stopping)" : "");
        std::fflush(stdout);
        all_ok = false;
        continue;
      }
      all_ok = all_ok && row.write_ok;
      rows.push_back(std::move(row));
    }
  }
  const Measurement copy_after = device_failed ? copy_before : timer.measure(copy, repetitions);
  const double copy_gbps = std::max(gigabytes_per_second(copy_bytes, copy_before.median_us),
                                    gigabytes_per_second(copy_bytes, copy_after.median_us));

  nlohmann::ordered_json json;
  json["impl"] = "zerojit";
  json["device"] = device.name;
  json["l2_bytes"] = context.l2_bytes;
  json["repetitions"] = repetitions;
  json["copy"] = {{"bytes", copy_bytes},
                  {"median_us_start", copy_before.median_us},
                  {"median_us_end", copy_after.median_us},
                  {"gbps_start", gigabytes_per_second(copy_bytes, copy_before.median_us)},
                  {"gbps_end", gigabytes_per_second(copy_bytes, copy_after.median_us)}};
  json["copy_gbps"] = copy_gbps;
  json["records"] = nlohmann::ordered_json::array();

  std::printf("\n%-16s %-8s %8s %7s %10s %4s %10s %10s %8s %7s\n", "kernel", "size", "tokens",
              "active", "MB", "sets", "median_us", "min_us", "GB/s", "copy%");
  for (const Row& row : rows) {
    const double gbps = gigabytes_per_second(row.c.bytes, row.m.median_us);
    std::printf("%-16s %-8s %8lld %7s %10.3f %4d %10.2f %10.2f %8.1f %6.1f%%%s\n",
                row.c.kernel.c_str(), row.c.size.c_str(), static_cast<long long>(row.c.tokens),
                row.c.active_tokens >= 0 ? std::to_string(row.c.active_tokens).c_str() : "-",
                static_cast<double>(row.c.bytes) / 1e6, row.sets, row.m.median_us, row.m.min_us,
                gbps, 100.0 * gbps / copy_gbps, row.write_ok ? "" : "  WRITE CHECK FAILED");
    nlohmann::ordered_json record;
    record["impl"] = "zerojit";
    record["kernel"] = row.c.kernel;
    record["size"] = row.c.size;
    record["tokens"] = row.c.tokens;
    if (row.c.active_tokens >= 0) record["active_tokens"] = row.c.active_tokens;
    record["bytes"] = row.c.bytes;
    record["median_us"] = row.m.median_us;
    record["min_us"] = row.m.min_us;
    record["gbps"] = gbps;
    record["copy_fraction"] = gbps / copy_gbps;
    record["input_sets"] = row.sets;
    record["repetitions"] = row.m.repetitions;
    record["formula"] = row.c.formula;
    record["written_bytes"] = row.c.written_bytes;
    if (row.c.sector_bytes > 0) {
      const double sector_gbps = gigabytes_per_second(row.c.sector_bytes, row.m.median_us);
      record["sector_bytes"] = row.c.sector_bytes;
      record["sector_copy_fraction"] = sector_gbps / copy_gbps;
    }
    record["changed_output_bytes"] = row.changed;
    record["write_check"] = row.write_ok ? "passed" : "failed";
    json["records"].push_back(record);
  }
  std::printf("%-16s %-8s %8s %7s %10.3f %4d %10.2f %10.2f %8.1f  (start)\n", "d2d_copy", "1GiB",
              "-", "-", static_cast<double>(copy_bytes) / 1e6, 1, copy_before.median_us,
              copy_before.min_us, gigabytes_per_second(copy_bytes, copy_before.median_us));
  std::printf("%-16s %-8s %8s %7s %10.3f %4d %10.2f %10.2f %8.1f  (end)\n", "d2d_copy", "1GiB", "-",
              "-", static_cast<double>(copy_bytes) / 1e6, 1, copy_after.median_us,
              copy_after.min_us, gigabytes_per_second(copy_bytes, copy_after.median_us));
  std::printf("copy roofline: %.1f GB/s (the faster of the two copies)\n", copy_gbps);
  std::printf("\nbytes moved (each input read once, each output written once):\n");
  std::set<std::string> printed;
  for (const Row& row : rows) {
    if (printed.insert(row.c.kernel).second) {
      std::printf("  %-16s %s\n", row.c.kernel.c_str(), row.c.formula.c_str());
    }
  }
  std::printf("  (H=64 heads, D=128, R=64 rope dims, K=512 top-k; T tokens of the call)\n");
  bool sector_header = false;
  for (const Row& row : rows) {
    if (row.c.sector_bytes <= 0) continue;
    if (!sector_header) {
      std::printf(
          "\nthe same at 32-byte sector granularity (each gathered sector counted once):\n");
      sector_header = true;
    }
    const double sector_gbps = gigabytes_per_second(row.c.sector_bytes, row.m.median_us);
    std::printf("  %-16s %-8s %10.3f MB %8.1f GB/s %6.1f%% of copy\n", row.c.kernel.c_str(),
                row.c.size.c_str(), static_cast<double>(row.c.sector_bytes) / 1e6, sector_gbps,
                100.0 * sector_gbps / copy_gbps);
  }

  if (!json_path.empty()) {
    std::ofstream file(json_path);
    if (!file) throw std::runtime_error("cannot write " + json_path);
    file << json.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  api.cuStreamDestroy(stream);
  std::printf("total %.1f s%s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count(),
              all_ok ? "" : "; SOME CASES FAILED (see above)");
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Achieved bandwidth of the DSv4 kernels at small, serving and large sizes, against a "
      "device-to-device copy in the same run. Exit code 77: no CUDA device."};
  std::string json_path;
  std::string kernels = "all";
  std::string sizes = "all";
  int repetitions = 50;
  bool dry = false;
  std::string compile_arch = "sm_90a";
  std::string kernel_help = "comma-separated kernels, or all:";
  for (const std::string& name : kKernelNames) kernel_help += " " + name;
  app.add_option("--json", json_path, "write the records to this JSON file");
  app.add_option("--kernels", kernels, kernel_help);
  app.add_option("--sizes", sizes,
                 "comma-separated sizes, or all: small serving large dense dense_large (dense*: "
                 "C128 stores only)");
  app.add_option("--repeat", repetitions, "timed repetitions per case (median and min)")
      ->check(CLI::Range(1, 10000));
  app.add_flag("--dry-run", dry,
               "no GPU needed: build the cases in host memory, check each with its kernel's "
               "plan and CPU reference, time nothing");
  app.add_option("--compile-arch", compile_arch,
                 "dry run: also compile every planned key and the timing spin for this arch "
                 "with NVRTC (none: do not)");
  CLI11_PARSE(app, argc, argv);

  try {
    const std::vector<std::string> chosen_kernels = select(kernels, kKernelNames, "kernel");
    const std::vector<std::string> chosen_sizes = select(sizes, kSizeNames, "size");
    if (dry) return dry_run(chosen_kernels, chosen_sizes, compile_arch);
    if (cuda::device_count() == 0) {
      std::printf("zerojit_bench_kernels: no CUDA device (%s); nothing measured\n",
                  cuda::driver_available() ? "the driver reports none"
                                           : cuda::driver_unavailable_reason().c_str());
      return kSkipExitCode;
    }
    return run(json_path, chosen_kernels, chosen_sizes, repetitions);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "zerojit_bench_kernels: %s\n", error.what());
    return 1;
  }
}

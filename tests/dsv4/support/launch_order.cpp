#include "dsv4/support/launch_order.hpp"

#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>

namespace zerojit::dsv4::testing {
namespace {

constexpr int kMaxCopies = 8;
// About 30 µs at the H200's 1.98 GHz boost clock: long enough that a dependent's prologue,
// launched as the producer starts, runs well before the producer writes.
constexpr long long kSpinCycles = 60000;

constexpr std::string_view kProducerSource =
    R"(// The PDL tests' producer (tests/dsv4/support/launch_order.hpp): releases its dependents,
// spins, then copies each staging buffer over its destination (16 bytes a step, then the tail).
namespace zj::testing {
struct ProducedCopy {
  unsigned char* destination;
  const unsigned char* source;
  unsigned long long bytes;
};
struct ProducerParams {
  ProducedCopy copies[8];
  int count;
  long long spin_cycles;
};
__global__ void producer_kernel(const __grid_constant__ ProducerParams params) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const long long start = clock64();
  while (clock64() - start < params.spin_cycles) {
  }
  const unsigned long long thread = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned long long threads = gridDim.x * blockDim.x;
  for (int c = 0; c < params.count; ++c) {
    const ProducedCopy copy = params.copies[c];
    const unsigned long long vectors = copy.bytes / 16;
    for (unsigned long long i = thread; i < vectors; i += threads) {
      reinterpret_cast<uint4*>(copy.destination)[i] =
          reinterpret_cast<const uint4*>(copy.source)[i];
    }
    for (unsigned long long i = vectors * 16 + thread; i < copy.bytes; i += threads) {
      copy.destination[i] = copy.source[i];
    }
  }
}
// The relay: nothing to do, and the protocol of zerojit/device/grid_dependency.cuh (releases its
// dependents first thing, waits for the producer on its way out).
__global__ void relay_kernel(int) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
}  // namespace zj::testing
)";
constexpr EmbeddedFile kProducerFiles[] = {{"tests/pdl_producer.cu", kProducerSource}};

struct ProducedCopy {
  void* destination;
  const void* source;
  unsigned long long bytes;
};
struct ProducerParams {
  ProducedCopy copies[kMaxCopies];
  int count;
  long long spin_cycles;
};

// One kernel owner for both test kernels: the key names the entry point.
struct ProducerKey {
  bool relay = false;
  static constexpr auto fields() { return std::tuple{field("relay", &ProducerKey::relay)}; }
  auto operator<=>(const ProducerKey&) const = default;
};
struct ProducerDescriptors {
  bool relay = false;
  static constexpr auto fields() { return std::tuple{field("relay", &ProducerDescriptors::relay)}; }
};

class ProducerKernel final : public JitKernel<ProducerKernel, ProducerKey, ProducerDescriptors> {
 public:
  ProducerKey dispatch(const ProducerDescriptors& d) const override { return {d.relay}; }
  Program program(const ProducerKey& key) const override {
    return make_program(key, "tests/pdl_producer.cu",
                        key.relay ? "zj::testing::relay_kernel" : "zj::testing::producer_kernel");
  }

 private:
  friend JitKernel;
  ProducerKernel() : JitKernel("tests.pdl_producer", files()) {}
  static const EmbeddedFileSet& files() {
    static const EmbeddedFileSet set{std::span<const EmbeddedFile>(kProducerFiles)};
    return set;
  }
};

// A small grid, launched with PDL: it starts as soon as the producer has released it.
void launch_relay(cuda::Stream stream) {
  ProducerKernel& kernel = ProducerKernel::instance();
  const ProducerDescriptors descriptors{.relay = true};
  LaunchSpec<ProducerKey> spec;
  spec.key = kernel.dispatch(descriptors);
  spec.geometry.grid.x = 4;
  spec.geometry.block.x = 32;
  spec.geometry.attributes.programmatic_serialization = true;
  spec.args.push(0);
  kernel.launch(spec, LaunchTarget{zerojit::testing::current_device(), stream}, &descriptors);
}

}  // namespace

std::string_view to_string(LaunchOrder order) {
  switch (order) {
    case LaunchOrder::alone:
      return "alone";
    case LaunchOrder::after_producer:
      return "after a producer, without PDL";
    case LaunchOrder::pdl_after_producer:
      return "after a producer, with PDL";
    case LaunchOrder::pdl_after_relay:
      return "after a producer and a relay, with PDL";
  }
  return "?";
}

void Producer::add(void* destination, const std::uint8_t* source, std::size_t bytes, bool device) {
  if (copies_.size() == kMaxCopies) throw std::logic_error("Producer: at most 8 inputs");
  Copy copy;
  copy.destination = destination;
  copy.bytes = bytes;
  if (device) {
    copy.staging = std::make_unique<zerojit::testing::DeviceBuffer>(
        std::span<const std::uint8_t>(source, bytes));
    cuda::check(cuda::driver().cuMemsetD8Async(reinterpret_cast<cuda::DevicePtr>(destination), 0xFF,
                                               bytes, nullptr),
                "cuMemsetD8Async (poison)");
  } else {
    copy.host.assign(source, source + bytes);
    std::memset(destination, 0xFF, bytes);
  }
  copies_.push_back(std::move(copy));
}

void Producer::run(LaunchOrder order, const std::function<void(cuda::Stream, bool)>& launch) {
  if (order == LaunchOrder::alone) {
    launch(nullptr, false);
    return;
  }
  if (copies_.empty() || copies_.front().staging == nullptr) {  // a dry run: host memory
    for (Copy& copy : copies_) std::memcpy(copy.destination, copy.host.data(), copy.bytes);
    launch(nullptr, order != LaunchOrder::after_producer);
    return;
  }
  zerojit::testing::synchronize();  // the uploads and the poison are in place
  zerojit::testing::Stream stream;
  ProducerParams params{};
  params.count = static_cast<int>(copies_.size());
  params.spin_cycles = kSpinCycles;
  for (std::size_t i = 0; i < copies_.size(); ++i) {
    params.copies[i] = {copies_[i].destination, copies_[i].staging->get(), copies_[i].bytes};
  }
  ProducerKernel& producer = ProducerKernel::instance();
  const ProducerDescriptors descriptors{};
  LaunchSpec<ProducerKey> spec;
  spec.key = producer.dispatch(descriptors);
  spec.geometry.grid.x = 264;
  spec.geometry.block.x = 256;
  spec.args.push(params);
  producer.launch(spec, LaunchTarget{zerojit::testing::current_device(), stream.get()},
                  &descriptors);
  if (order == LaunchOrder::pdl_after_relay) launch_relay(stream.get());
  launch(stream.get(), order != LaunchOrder::after_producer);
  stream.synchronize();
}

}  // namespace zerojit::dsv4::testing

#include "dsv4/support/gpu_harness.hpp"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "dsv4/compressor/reference.hpp"
#include "dsv4/family.hpp"

namespace zerojit::dsv4::testing {

namespace ref = zerojit::dsv4::reference;

bool dry_run() {
  const char* value = std::getenv("ZEROJIT_DSV4_GPU_DRY_RUN");
  return value != nullptr && std::string_view(value) == "1";
}

// --- Placement ---------------------------------------------------------------------------------

TensorRef Placement::put(const HostTensor& tensor) {
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

TensorRef Placement::put_produced(const HostTensor& tensor, Producer& producer, LaunchOrder order) {
  const TensorRef ref = put(tensor);
  if (order != LaunchOrder::alone) {
    producer.add(static_cast<std::uint8_t*>(ref.data) - tensor.offset_bytes, tensor.bytes.data(),
                 tensor.bytes.size(), !dry_run());
  }
  return ref;
}

std::vector<std::uint8_t> Placement::get(const HostTensor& tensor) const {
  for (const Allocation& allocation : allocations_) {
    if (allocation.source != &tensor) continue;
    if (allocation.device) return allocation.device->download<std::uint8_t>();
    const auto begin =
        allocation.host.begin() + static_cast<std::ptrdiff_t>(allocation.host_offset);
    return {begin, begin + static_cast<std::ptrdiff_t>(tensor.bytes.size())};
  }
  throw std::logic_error("Placement::get: the tensor was never put");
}

void finish() {
  if (!dry_run()) zerojit::testing::synchronize();
}

// --- The dry run's backend ---------------------------------------------------------------------

namespace {

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

// The argument block type of an owner's reference(key, params) (which may return what it
// wrote, ignored here).
template <class Function>
struct ReferenceParams;
template <class Result, class Key, class Params>
struct ReferenceParams<Result (*)(const Key&, const Params&)> {
  using type = Params;
};

// Runs the reference of the family's kernel named `kernel`: its typed key read back from the
// loaded artifact's key text, its argument block from the launch.
void run_reference(const std::string& kernel, const std::string& key_text, const KernelArgs& args) {
  bool found = false;
  kFamily.for_each_row([&](const auto& row) {
    using Kernel = typename std::decay_t<decltype(row)>::KernelType;
    if (found || Kernel::instance().name() != kernel) return;
    found = true;
    using Key = typename Kernel::Key;
    using Params = typename ReferenceParams<decltype(&Kernel::reference)>::type;
    Kernel::reference(key_from_text<Key>(key_text), unpack<Params>(args));
  });
  if (!found) throw std::logic_error("reference backend: no family kernel " + kernel);
}

}  // namespace

LoadedFunction ReferenceBackend::load(const CompiledArtifact& artifact, std::string_view,
                                      int device) {
  loaded_.push_back({artifact.kernel_name, artifact.key_text});
  LoadedFunction function;
  function.function = reinterpret_cast<cuda::Function>(loaded_.size());
  function.device = device;
  return function;
}

void ReferenceBackend::launch(const LoadedFunction& function, const LaunchGeometry&,
                              const KernelArgs& args, cuda::Stream) {
  if (!execute) return;
  const Loaded& entry = loaded_.at(reinterpret_cast<std::size_t>(function.function) - 1);
  run_reference(entry.kernel, entry.key, args);
}

// --- Fixture -----------------------------------------------------------------------------------

void Dsv4Gpu::SetUp() {
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

void Dsv4Gpu::TearDown() {
  Monitor::instance().disarm();
  Monitor::instance().set_mode(MonitorMode::off);
  if (reference_backend_) {
    for (KernelBase* kernel : all_kernels()) kernel->reset_for_testing();
    Runtime::instance().set_backend(make_cuda_backend());
    Runtime::instance().set_artifact_store(previous_store_);
  }
}

// --- Comparisons -------------------------------------------------------------------------------

std::string case_label(std::string_view kernel, std::string_view name) {
  return std::string(kernel) + " case '" + std::string(name) + "'";
}

void append_failure(std::string& failures, const std::string& label, std::string_view output,
                    const std::string& failure) {
  if (failure.empty()) return;
  failures +=
      (failures.empty() ? "" : "\n") + label + ", output " + std::string(output) + ": " + failure;
}

std::string compare_tensor(const HostTensor& expected, const std::vector<std::uint8_t>& actual,
                           std::vector<std::string> names) {
  return compare_bytes(expected.bytes, actual,
                       element_locator(expected, std::move(names), expected.bytes, actual));
}

std::span<const float> float_view(const std::vector<std::uint8_t>& bytes, std::int64_t offset,
                                  std::int64_t count) {
  return {reinterpret_cast<const float*>(bytes.data() + offset), static_cast<std::size_t>(count)};
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

}  // namespace zerojit::dsv4::testing

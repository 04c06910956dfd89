#include "kernels/device_set.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace zerojit::bench {

DeviceMemory::DeviceMemory(std::size_t bytes, bool host) : bytes_(bytes) {
  if (host) {
    constexpr std::size_t kAlignment = 256;  // what cuMemAlloc gives
    host_.assign(bytes + kAlignment, 0);
    const auto base = reinterpret_cast<std::uintptr_t>(host_.data());
    address_ = (base + kAlignment - 1) / kAlignment * kAlignment;
  } else {
    cuda::check(cuda::driver().cuMemAlloc(&address_, bytes == 0 ? 1 : bytes), "cuMemAlloc");
  }
}

DeviceMemory::~DeviceMemory() {
  if (host_.empty() && address_ != 0) cuda::driver().cuMemFree(address_);
}

void DeviceMemory::upload(const void* source) {
  if (on_host()) {
    std::memcpy(pointer(), source, bytes_);
  } else {
    cuda::check(cuda::driver().cuMemcpyHtoD(address_, source, bytes_), "cuMemcpyHtoD");
  }
}

void DeviceMemory::copy_from(const DeviceMemory& other) {
  if (on_host()) {
    std::memcpy(pointer(), other.pointer(), bytes_);
  } else {
    cuda::check(cuda::driver().cuMemcpyDtoD(address_, other.address(), bytes_), "cuMemcpyDtoD");
  }
}

void DeviceMemory::download(std::vector<std::uint8_t>& host) const {
  host.resize(bytes_);
  if (on_host()) {
    std::memcpy(host.data(), pointer(), bytes_);
  } else {
    cuda::check(cuda::driver().cuMemcpyDtoH(host.data(), address_, bytes_), "cuMemcpyDtoH");
  }
}

TensorRef DeviceSet::put(const dsv4::testing::HostTensor& tensor, bool output) {
  const std::size_t bytes = tensor.bytes.size();
  if (replica_) {
    if (next_ >= memory_.size() || memory_[next_]->bytes() != bytes) {
      throw std::logic_error("DeviceSet: a replica was filled in another order than its original");
    }
  } else {
    memory_.push_back(std::make_unique<DeviceMemory>(bytes, host_));
    memory_.back()->upload(tensor.bytes.data());
    outputs_.push_back(output);
  }
  const DeviceMemory& memory = *memory_[next_++];
  return make_tensor_ref(memory.pointer() + tensor.offset_bytes, tensor.desc);
}

DeviceSet DeviceSet::replicate() const {
  DeviceSet copy(host_);
  copy.replica_ = true;
  copy.outputs_ = outputs_;
  for (const auto& memory : memory_) {
    copy.memory_.push_back(std::make_unique<DeviceMemory>(memory->bytes(), host_));
    copy.memory_.back()->copy_from(*memory);
  }
  return copy;
}

std::int64_t DeviceSet::allocated_bytes() const {
  std::int64_t total = 0;
  for (const auto& memory : memory_) total += static_cast<std::int64_t>(memory->bytes());
  return total;
}

std::int64_t DeviceSet::changed_output_bytes() const {
  if (!host_) cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  std::int64_t changed = 0;
  std::vector<std::uint8_t> host;
  for (std::size_t i = 0; i < memory_.size(); ++i) {
    if (!outputs_[i]) continue;
    memory_[i]->download(host);
    changed += std::count_if(host.begin(), host.end(),
                             [](std::uint8_t byte) { return byte != dsv4::testing::kSentinel; });
  }
  return changed;
}

}  // namespace zerojit::bench

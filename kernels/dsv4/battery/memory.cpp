// Where the battery's buffers live: fake addresses (dispatch only) or device memory.
#include <algorithm>

#include "dsv4/battery/workspace.hpp"
#include "zerojit/cuda.hpp"

namespace zerojit::dsv4 {
namespace {

constexpr std::int64_t kAddressAlignment = 256;

class VirtualMemory final : public BatteryMemory {
 public:
  explicit VirtualMemory(int device) : device_(device) {}
  Device device() const override { return Device::cuda(device_); }
  bool holds_data() const override { return false; }
  void* allocate(std::size_t bytes) override {
    // A plausible device address range; never dereferenced.
    const std::uint64_t address = next_;
    next_ += static_cast<std::uint64_t>(
        round_up(static_cast<std::int64_t>(bytes) + 1, kAddressAlignment));
    allocated_ += bytes;
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
  }
  void upload(void*, const void*, std::size_t) override {}
  std::size_t allocated_bytes() const override { return allocated_; }

 private:
  int device_;
  std::uint64_t next_ = 0x7f0000000000ULL;
  std::size_t allocated_ = 0;
};

class DeviceMemory final : public BatteryMemory {
 public:
  explicit DeviceMemory(int device) : device_(device) { cuda::make_device_current(device); }
  ~DeviceMemory() override {
    if (buffers_.empty()) return;
    const cuda::DriverApi& api = cuda::driver();
    cuda::make_device_current(device_);
    api.cuCtxSynchronize();
    for (cuda::DevicePtr pointer : buffers_) api.cuMemFree(pointer);
  }
  Device device() const override { return Device::cuda(device_); }
  bool holds_data() const override { return true; }
  void* allocate(std::size_t bytes) override {
    cuda::DevicePtr pointer = 0;
    cuda::check(cuda::driver().cuMemAlloc(&pointer, std::max<std::size_t>(bytes, 1)),
                "cuMemAlloc(" + std::to_string(bytes) +
                    " bytes for the serving battery on device " + std::to_string(device_) + ")");
    buffers_.push_back(pointer);
    allocated_ += bytes;
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(pointer));
  }
  void upload(void* destination, const void* source, std::size_t bytes) override {
    // Synchronous: it also orders the upload after the previous step's launches on the
    // legacy default stream, which read the same metadata buffers.
    cuda::check(cuda::driver().cuMemcpyHtoD(
                    static_cast<cuda::DevicePtr>(reinterpret_cast<std::uintptr_t>(destination)),
                    source, bytes),
                "cuMemcpyHtoD");
  }
  std::size_t allocated_bytes() const override { return allocated_; }

 private:
  int device_;
  std::vector<cuda::DevicePtr> buffers_;
  std::size_t allocated_ = 0;
};

}  // namespace

std::unique_ptr<BatteryMemory> make_virtual_battery_memory(int device_ordinal) {
  return std::make_unique<VirtualMemory>(device_ordinal);
}

std::unique_ptr<BatteryMemory> make_device_battery_memory(int device) {
  return std::make_unique<DeviceMemory>(device);
}

}  // namespace zerojit::dsv4

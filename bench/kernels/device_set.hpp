// Where a bandwidth case's tensors live: device memory or, in a dry run, 256-byte aligned host
// memory standing in for it; and the input sets a case rotates among.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "dsv4/support/inputs.hpp"
#include "zerojit/zerojit.hpp"

namespace zerojit::bench {

// Device memory, or (dry run) 256-byte aligned host memory standing in for it.
class DeviceMemory {
 public:
  DeviceMemory(std::size_t bytes, bool host);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  cuda::DevicePtr address() const { return address_; }
  std::uint8_t* pointer() const { return reinterpret_cast<std::uint8_t*>(address_); }
  std::size_t bytes() const { return bytes_; }
  bool on_host() const { return !host_.empty(); }

  void upload(const void* source);
  void copy_from(const DeviceMemory& other);
  void download(std::vector<std::uint8_t>& host) const;

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
  TensorRef put(const dsv4::testing::HostTensor& tensor, bool output = false);

  DeviceSet replicate() const;

  std::int64_t allocated_bytes() const;

  // Bytes of the outputs that no longer hold the sentinel.
  std::int64_t changed_output_bytes() const;

 private:
  bool host_;
  std::vector<std::unique_ptr<DeviceMemory>> memory_;
  std::vector<bool> outputs_;
  std::size_t next_ = 0;
  bool replica_ = false;
};

}  // namespace zerojit::bench

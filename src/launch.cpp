#include "zerojit/launch.hpp"

#include "zerojit/backend.hpp"
#include "zerojit/error.hpp"

namespace zerojit {

std::size_t KernelArgs::reserve(std::size_t bytes, std::size_t alignment) {
  if (count_ >= kMaxKernelParams) {
    throw Error("a kernel takes at most " + std::to_string(kMaxKernelParams) + " arguments");
  }
  const std::size_t offset = (used_ + alignment - 1) / alignment * alignment;
  if (offset + bytes > kKernelArgBytes) {
    throw Error("kernel arguments exceed " + std::to_string(kKernelArgBytes) + " bytes");
  }
  offsets_[static_cast<std::size_t>(count_)] = static_cast<std::uint16_t>(offset);
  sizes_[static_cast<std::size_t>(count_)] = static_cast<std::uint16_t>(bytes);
  used_ = static_cast<std::uint16_t>(offset + bytes);
  ++count_;
  return offset;
}

void KernelArgs::fill_pointers(std::array<void*, kMaxKernelParams>& out) const {
  auto* base = const_cast<std::byte*>(storage_.data());
  for (int i = 0; i < count_; ++i) {
    out[static_cast<std::size_t>(i)] = base + offsets_[static_cast<std::size_t>(i)];
  }
}

void adopt_entry_kind(const CompiledArtifact& artifact, LoadedFunction& function) {
  const EntryKind& kind = entry_kind(artifact.language);
  function.form = kind.launch;
  function.host_runtime = kind.host_runtime != nullptr ? kind.host_runtime() : nullptr;
  if (kind.adopt_record != nullptr) kind.adopt_record(artifact, function);
}

}  // namespace zerojit

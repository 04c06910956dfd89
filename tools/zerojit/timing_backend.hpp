// A backend that times every launch with CUDA events, per kernel, around the real one. The
// battery calls the kernels exactly as the attention layer does (some calls launch two
// kernels), so timing has to sit below the calls, where each launch is seen.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "zerojit/backend.hpp"

namespace zerojit::tool {

struct KernelTiming {
  std::uint64_t launches = 0;
  double milliseconds = 0.0;
};

class TimingBackend final : public Backend {
 public:
  explicit TimingBackend(std::shared_ptr<Backend> inner) : inner_(std::move(inner)) {}
  ~TimingBackend() override;

  std::string_view name() const override { return inner_->name(); }
  int device_count() override { return inner_->device_count(); }
  std::string target_arch(int device) override { return inner_->target_arch(device); }
  LoadedFunction load(const CompiledArtifact& artifact, std::string_view lowered_name,
                      int device) override;
  bool is_capturing(cuda::Stream stream) override { return inner_->is_capturing(stream); }
  void launch(const LoadedFunction& function, const LaunchGeometry& geometry,
              const KernelArgs& args, cuda::Stream stream) override;

  // Waits for the launches recorded since the last call and adds their times, per kernel
  // name, into `totals`. Call it with the launching device's context current.
  void collect(std::map<std::string, KernelTiming>& totals);

 private:
  struct Record {
    const std::string* kernel;
    int device;
    cuda::Event start;
    cuda::Event end;
  };
  cuda::Event take_event(int device);

  std::shared_ptr<Backend> inner_;
  std::mutex mutex_;
  std::unordered_map<cuda::Function, std::string> kernel_of_;
  std::vector<Record> records_;
  std::map<int, std::vector<cuda::Event>> free_events_;  // per device: events belong to its context
};

}  // namespace zerojit::tool

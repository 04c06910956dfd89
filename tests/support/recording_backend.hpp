// A Backend that records instead of touching a GPU: CPU tests use it to check what the kernel
// contract would load and launch, in what order, with which arguments.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "zerojit/backend.hpp"

namespace zerojit::testing {

struct RecordedLaunch {
  std::string kernel;
  std::string key;  // the key text of the artifact whose executor launched
  LaunchGeometry geometry;
  std::vector<std::size_t> arg_sizes;
  cuda::Stream stream = nullptr;
};

class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(int devices = 1, std::string arch = "sm_90a")
      : devices_(devices), arch_(std::move(arch)) {}

  std::string_view name() const override { return "recording"; }
  int device_count() override { return devices_; }
  std::string target_arch(int) override { return arch_; }

  LoadedFunction load(const CompiledArtifact& artifact, std::string_view, int device) override {
    std::lock_guard lock(mutex_);
    loads.push_back(artifact.kernel_name + " [" + artifact.key_text + "] on " +
                    std::to_string(device));
    LoadedFunction function;
    // A distinct fake handle per load, so tests can tell executors apart.
    function.function = reinterpret_cast<cuda::Function>(loads.size());
    function.device = device;
    function.param_count = param_count;
    function.param_sizes = param_sizes;
    // As the CUDA backend does: the entry kind's form, and what its record fixes.
    adopt_entry_kind(artifact, function);
    function_names.push_back(artifact.kernel_name);
    function_keys.push_back(artifact.key_text);
    loaded_records.push_back(artifact.launch_record);
    return function;
  }

  bool is_capturing(cuda::Stream) override { return capturing; }

  void launch(const LoadedFunction& function, const LaunchGeometry& geometry,
              const KernelArgs& args, cuda::Stream stream) override {
    std::lock_guard lock(mutex_);
    RecordedLaunch launch;
    launch.kernel = function_names[reinterpret_cast<std::size_t>(function.function) - 1];
    launch.key = function_keys[reinterpret_cast<std::size_t>(function.function) - 1];
    launch.geometry = geometry;
    for (int i = 0; i < args.count(); ++i) launch.arg_sizes.push_back(args.size(i));
    launch.stream = stream;
    launches.push_back(launch);
    if (on_launch) on_launch();
  }

  void run_host(const LoadedFunction& function, void**, std::size_t count) override {
    std::lock_guard lock(mutex_);
    host_runs.push_back(function_names[reinterpret_cast<std::size_t>(function.function) - 1] +
                        " with " + std::to_string(count) + " arguments");
  }

  // What the next loads report as the kernel's parameters (-1: unknown, no check).
  int param_count = -1;
  std::array<std::uint32_t, kMaxKernelParams> param_sizes{};
  bool capturing = false;
  std::function<void()> on_launch;

  std::vector<std::string> loads;
  std::vector<std::string> loaded_records;  // each load's launch record, in order
  std::vector<RecordedLaunch> launches;
  std::vector<std::string> host_runs;

 private:
  int devices_;
  std::string arch_;
  std::mutex mutex_;
  std::vector<std::string> function_names;
  std::vector<std::string> function_keys;
};

}  // namespace zerojit::testing

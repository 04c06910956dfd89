#include "timing_backend.hpp"

#include "zerojit/cuda.hpp"

namespace zerojit::tool {

TimingBackend::~TimingBackend() {
  // Events die with their contexts at exit; destroying them here could run after the driver
  // has been torn down, so they are left to it.
}

LoadedFunction TimingBackend::load(const CompiledArtifact& artifact, std::string_view lowered_name,
                                   int device) {
  LoadedFunction function = inner_->load(artifact, lowered_name, device);
  std::lock_guard lock(mutex_);
  kernel_of_[function.function] = artifact.kernel_name;
  return function;
}

cuda::Event TimingBackend::take_event(int device) {
  std::vector<cuda::Event>& pool = free_events_[device];
  if (!pool.empty()) {
    const cuda::Event event = pool.back();
    pool.pop_back();
    return event;
  }
  cuda::Event event = nullptr;
  cuda::check(cuda::driver().cuEventCreate(&event, cuda::kEventDefault), "cuEventCreate");
  return event;
}

void TimingBackend::launch(const LoadedFunction& function, const LaunchGeometry& geometry,
                           const KernelArgs& args, cuda::Stream stream) {
  const cuda::DriverApi& api = cuda::driver();
  std::unique_lock lock(mutex_);
  const auto it = kernel_of_.find(function.function);
  if (it == kernel_of_.end() || inner_->is_capturing(stream)) {
    lock.unlock();
    inner_->launch(function, geometry, args, stream);
    return;
  }
  Record record{&it->second, function.device, take_event(function.device),
                take_event(function.device)};
  lock.unlock();
  cuda::check(api.cuEventRecord(record.start, stream), "cuEventRecord");
  inner_->launch(function, geometry, args, stream);
  cuda::check(api.cuEventRecord(record.end, stream), "cuEventRecord");
  lock.lock();
  records_.push_back(record);
}

void TimingBackend::collect(std::map<std::string, KernelTiming>& totals) {
  std::vector<Record> records;
  {
    std::lock_guard lock(mutex_);
    records.swap(records_);
  }
  const cuda::DriverApi& api = cuda::driver();
  for (const Record& record : records) {
    cuda::check(api.cuEventSynchronize(record.end), "cuEventSynchronize");
    float milliseconds = 0.0f;
    cuda::check(api.cuEventElapsedTime(&milliseconds, record.start, record.end),
                "cuEventElapsedTime");
    KernelTiming& timing = totals[*record.kernel];
    ++timing.launches;
    timing.milliseconds += milliseconds;
  }
  std::lock_guard lock(mutex_);
  for (const Record& record : records) {
    free_events_[record.device].push_back(record.start);
    free_events_[record.device].push_back(record.end);
  }
}

}  // namespace zerojit::tool

#include "zerojit/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace zerojit {

int default_job_count() {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : static_cast<int>(cores);
}

void parallel_for(std::size_t count, int jobs, const std::function<void(std::size_t)>& body) {
  if (count == 0) return;
  if (jobs <= 0) jobs = default_job_count();
  const std::size_t workers = std::min<std::size_t>(static_cast<std::size_t>(jobs), count);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) body(i);
  };
  if (workers == 1) {
    work();
    return;
  }
  std::vector<std::jthread> threads;
  threads.reserve(workers - 1);
  for (std::size_t t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
}

}  // namespace zerojit

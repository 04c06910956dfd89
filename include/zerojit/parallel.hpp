// A bounded pool for compile jobs: NVRTC compiles are independent and CPU-bound, so warmup
// runs them `jobs` at a time.
#pragma once

#include <cstddef>
#include <functional>

namespace zerojit {

// One job per core (std::thread::hardware_concurrency, at least 1).
int default_job_count();

// Runs body(0) .. body(count - 1) on at most `jobs` threads (jobs <= 0: default_job_count())
// and returns when all are done. The body must not throw: catch and record per index.
void parallel_for(std::size_t count, int jobs, const std::function<void(std::size_t)>& body);

}  // namespace zerojit

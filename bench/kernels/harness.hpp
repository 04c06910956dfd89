// The bandwidth benchmark's two modes over the registered cases (cases.hpp): a dry run that
// builds and checks every case without a GPU, and the timed run with its report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cases.hpp"

namespace zerojit::bench {

// The kernels and sizes a run covers, in canonical order.
struct Selection {
  std::vector<KernelCases> kernels;
  std::vector<std::string> sizes;
  std::int64_t grid_x = 0;  // Context::grid_x
};

// The case of `kernel` at `size`, or an empty Case (no kernel) for a size the kernel does not
// have: callers skip it.
Case make_case(const KernelCases& kernel, const std::string& size, const Context& context);

// Without a GPU: builds every case in host memory, validates its arguments with the kernel's
// plan (every input set), runs the CPU reference on the first set and checks what it wrote
// against the case's byte count. Times nothing. `compile_arch` ("none": do not) also compiles
// every planned key and the timing spin. Returns the exit code.
int dry_run(const Selection& selection, const std::string& compile_arch);

// How a case's device time is taken: one launch between events behind a GPU spin (eager), a
// CUDA graph of one launch per input set replayed after an L2 flush (graph), or both.
enum class Timing { eager, graph, both };

// Times every case on device 0 against the copy roofline, prints the table and writes the
// records to `json_path` (empty: no file). Returns the exit code.
int run(const std::string& json_path, const Selection& selection, int repetitions, Timing timing);

double gigabytes_per_second(std::int64_t bytes, double microseconds);

// The write check: the outputs changed at most the bytes the case writes and at least 90 % of
// them (a stray code may equal the 0xA5 sentinel).
inline bool write_check_passes(std::int64_t changed, std::int64_t written) {
  return changed <= written && changed * 10 >= written * 9;
}

}  // namespace zerojit::bench

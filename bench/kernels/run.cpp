#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/harness.hpp"

namespace zerojit::bench {

namespace {

// The copy roofline moves 1 GiB (read) + 1 GiB (written).
constexpr std::int64_t kCopyBytes = std::int64_t{1} << 30;

// A copy of a case's own size, timed as its graph is: `sets` copies of bytes / 2 each (read +
// written = the case's bytes), each between its own buffers as each input set has its own, in
// one graph replayed after the same L2 flush, by a plain copy kernel (CopyKernel). Whatever a
// replay costs beyond the bytes at full bandwidth (the graph's start, the ramp-up and the tail
// of a launch, the flush's dirty lines written back) the copy pays as well, so the kernel's
// time over it is the share of the rate a memory-bound kernel can reach at that size; the
// 1 GiB roofline hides those costs and so undervalues mid sizes.
Measurement same_size_copy(Timer& timer, CopyKernel& copy_kernel, std::int64_t bytes, int sets,
                           int repetitions) {
  const auto& api = cuda::driver();
  const auto half = static_cast<std::size_t>((bytes / 2 + 255) / 256 * 256);
  const auto count = static_cast<std::size_t>(std::max(1, sets));
  DeviceMemory source(half * count, false);
  DeviceMemory destination(half * count, false);
  cuda::check(api.cuMemsetD8(source.address(), 0x5A, source.bytes()), "cuMemsetD8");
  cuda::check(api.cuCtxSynchronize(), "cuCtxSynchronize");
  std::vector<Launch> copies;
  for (std::size_t i = 0; i < count; ++i) {
    copies.push_back([&, offset = i * half](cuda::Stream s) {
      copy_kernel(destination.address() + offset, source.address() + offset, half, s);
    });
  }
  return timer.measure_graph(copies, repetitions);
}

// What run measured of one kernel case.
struct Row {
  Case c;
  Measurement m;           // eager: one launch between events, behind a spin
  Measurement graph;       // CUDA-graph replay, cold L2 (zero repetitions: not measured)
  Measurement graph_copy;  // a copy of the case's bytes, replayed the same way
  bool write_ok = true;
  std::int64_t changed = 0;
  int sets = 1;
};

// The cases' rows, and whether every case was built, measured and wrote what it should.
struct MeasuredCases {
  std::vector<Row> rows;
  bool all_ok = true;
  bool device_failed = false;  // a driver call failed: the cases after it were skipped
};

// Every case of the selection built and timed (eager, graph or both), each next to a copy of
// its own size (see same_size_copy).
MeasuredCases measure_cases(const Selection& selection, const Context& context, Timer& timer,
                            CopyKernel& copy_kernel, int repetitions, Timing timing) {
  const bool eager = timing != Timing::graph;
  const bool graph = timing != Timing::eager;
  MeasuredCases measured;
  for (const KernelCases& kernel : selection.kernels) {
    for (const std::string& size : selection.sizes) {
      if (measured.device_failed) break;
      Row row;
      const auto build_start = std::chrono::steady_clock::now();
      try {
        Case c = make_case(kernel, size, context);
        if (c.kernel.empty()) continue;
        const double build_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start).count();
        if (eager) row.m = timer.measure(c.launches, repetitions);
        if (graph) row.graph = timer.measure_graph(c.launches, repetitions);
        if (!eager) row.m = row.graph;
        row.changed = c.sets.front().changed_output_bytes();
        row.write_ok = write_check_passes(row.changed, c.written_bytes);
        row.sets = static_cast<int>(c.sets.size());
        std::printf(
            "  %-16s %-13s built in %5.2f s, %2d input set(s), %9.2f us, graph %9.2f us%s\n",
            kernel.kernel.c_str(), size.c_str(), build_s, row.sets, row.m.median_us,
            row.graph.median_us, row.write_ok ? "" : "  WRITE CHECK FAILED");
        std::fflush(stdout);
        c.sets.clear();
        c.launches.clear();
        if (graph) {
          row.graph_copy = same_size_copy(timer, copy_kernel, c.bytes, row.sets, repetitions);
        }
        row.c = std::move(c);
      } catch (const std::exception& error) {
        // A failed driver call may leave the context unusable: the cases after it are
        // skipped, and what was measured is still reported.
        measured.device_failed = dynamic_cast<const CudaError*>(&error) != nullptr;
        std::printf("  %-16s %-8s FAILED: %s%s\n", kernel.kernel.c_str(), size.c_str(),
                    error.what(), measured.device_failed ? " (stopping)" : "");
        std::fflush(stdout);
        measured.all_ok = false;
        continue;
      }
      measured.all_ok = measured.all_ok && row.write_ok;
      measured.rows.push_back(std::move(row));
    }
  }
  return measured;
}

// A row's record in the JSON report.
nlohmann::ordered_json record_of(const Row& row, double gbps, double graph_gbps, double copy_gbps) {
  nlohmann::ordered_json record;
  record["impl"] = "zerojit";
  record["kernel"] = row.c.kernel;
  record["size"] = row.c.size;
  record["tokens"] = row.c.tokens;
  if (row.c.active_tokens >= 0) record["active_tokens"] = row.c.active_tokens;
  record["bytes"] = row.c.bytes;
  record["median_us"] = row.m.median_us;
  record["min_us"] = row.m.min_us;
  record["gbps"] = gbps;
  record["copy_fraction"] = gbps / copy_gbps;
  if (row.graph.repetitions > 0) {
    record["graph_median_us"] = row.graph.median_us;
    record["graph_min_us"] = row.graph.min_us;
    record["graph_copy_fraction"] = graph_gbps / copy_gbps;
    record["graph_same_size_copy_us"] = row.graph_copy.median_us;
    record["graph_same_size_copy_fraction"] = row.graph_copy.median_us / row.graph.median_us;
  }
  record["input_sets"] = row.sets;
  record["repetitions"] = row.m.repetitions;
  record["formula"] = row.c.formula;
  record["written_bytes"] = row.c.written_bytes;
  if (row.c.sector_bytes > 0) {
    const double sector_gbps = gigabytes_per_second(row.c.sector_bytes, row.m.median_us);
    record["sector_bytes"] = row.c.sector_bytes;
    record["sector_copy_fraction"] = sector_gbps / copy_gbps;
  }
  record["changed_output_bytes"] = row.changed;
  record["write_check"] = row.write_ok ? "passed" : "failed";
  return record;
}

// What each kernel's bytes count, and the rates at 32-byte sector granularity where a case
// gathers.
void print_bytes_moved(const std::vector<Row>& rows, double copy_gbps) {
  std::printf("\nbytes moved (each input read once, each output written once):\n");
  std::set<std::string> printed;
  for (const Row& row : rows) {
    if (printed.insert(row.c.kernel).second) {
      std::printf("  %-16s %s\n", row.c.kernel.c_str(), row.c.formula.c_str());
    }
  }
  std::printf("  (H=64 heads, D=128, R=64 rope dims, K=512 top-k; T tokens of the call)\n");
  bool sector_header = false;
  for (const Row& row : rows) {
    if (row.c.sector_bytes <= 0) continue;
    if (!sector_header) {
      std::printf(
          "\nthe same at 32-byte sector granularity (each gathered sector counted once):\n");
      sector_header = true;
    }
    const double sector_gbps = gigabytes_per_second(row.c.sector_bytes, row.m.median_us);
    std::printf("  %-16s %-8s %10.3f MB %8.1f GB/s %6.1f%% of copy\n", row.c.kernel.c_str(),
                row.c.size.c_str(), static_cast<double>(row.c.sector_bytes) / 1e6, sector_gbps,
                100.0 * sector_gbps / copy_gbps);
  }
}

// The results table, one line a case, each also a record appended to `records`.
void print_rows(const std::vector<Row>& rows, double copy_gbps, nlohmann::ordered_json& records) {
  // graph_us's copy% is against the 1 GiB roofline, size% against a copy of the case's size
  // replayed the same way (copy_us; see same_size_copy).
  std::printf("\n%-16s %-13s %8s %7s %10s %4s %10s %10s %8s %7s %10s %7s %9s %6s\n", "kernel",
              "size", "tokens", "active", "MB", "sets", "median_us", "min_us", "GB/s", "copy%",
              "graph_us", "copy%", "copy_us", "size%");
  for (const Row& row : rows) {
    const double gbps = gigabytes_per_second(row.c.bytes, row.m.median_us);
    const double graph_gbps =
        row.graph.repetitions > 0 ? gigabytes_per_second(row.c.bytes, row.graph.median_us) : 0.0;
    const double size_fraction =
        row.graph.repetitions > 0 ? row.graph_copy.median_us / row.graph.median_us : 0.0;
    std::printf(
        "%-16s %-13s %8lld %7s %10.3f %4d %10.2f %10.2f %8.1f %6.1f%% %10.2f %6.1f%% %9.2f "
        "%5.1f%%%s\n",
        row.c.kernel.c_str(), row.c.size.c_str(), static_cast<long long>(row.c.tokens),
        row.c.active_tokens >= 0 ? std::to_string(row.c.active_tokens).c_str() : "-",
        static_cast<double>(row.c.bytes) / 1e6, row.sets, row.m.median_us, row.m.min_us, gbps,
        100.0 * gbps / copy_gbps, row.graph.median_us, 100.0 * graph_gbps / copy_gbps,
        row.graph_copy.median_us, 100.0 * size_fraction,
        row.write_ok ? "" : "  WRITE CHECK FAILED");
    records.push_back(record_of(row, gbps, graph_gbps, copy_gbps));
  }
}

// The 1 GiB copies before and after the cases, the roofline they give, and the same-size
// copies' kernel on the roofline's bytes.
void print_copies(std::int64_t copy_bytes, const Measurement& copy_before,
                  const Measurement& copy_after, const Measurement& kernel_copy, double copy_gbps) {
  std::printf("%-16s %-8s %8s %7s %10.3f %4d %10.2f %10.2f %8.1f  (start)\n", "d2d_copy", "1GiB",
              "-", "-", static_cast<double>(copy_bytes) / 1e6, 1, copy_before.median_us,
              copy_before.min_us, gigabytes_per_second(copy_bytes, copy_before.median_us));
  std::printf("%-16s %-8s %8s %7s %10.3f %4d %10.2f %10.2f %8.1f  (end)\n", "d2d_copy", "1GiB", "-",
              "-", static_cast<double>(copy_bytes) / 1e6, 1, copy_after.median_us,
              copy_after.min_us, gigabytes_per_second(copy_bytes, copy_after.median_us));
  std::printf("copy roofline: %.1f GB/s (the faster of the two copies)\n", copy_gbps);
  if (kernel_copy.repetitions > 0) {
    std::printf("copy kernel (the copy_us yardstick), 1 GiB, graph replay: %.2f us, %.1f GB/s\n",
                kernel_copy.median_us, gigabytes_per_second(copy_bytes, kernel_copy.median_us));
  }
}

}  // namespace

int run(const std::string& json_path, const Selection& selection, int repetitions, Timing timing) {
  const auto wall_start = std::chrono::steady_clock::now();
  const TimedDevice timed = open_timed_device();
  const cuda::DeviceInfo& device = timed.info;
  const int clock_khz = timed.clock_khz;
  cuda::Stream stream = timed.stream;
  const auto& api = cuda::driver();
  Context context;
  if (device.l2_cache_bytes > 0) context.l2_bytes = device.l2_cache_bytes;
  context.grid_x = selection.grid_x;
  std::printf("device: %s (sm_%d%d, %d SMs, L2 %.0f MB, SM clock %.0f MHz), %d repetitions\n",
              device.name.c_str(), device.compute_major, device.compute_minor,
              device.multiprocessors, static_cast<double>(context.l2_bytes) / 1e6, clock_khz / 1e3,
              repetitions);
  std::fflush(stdout);

  CopyKernel copy_kernel;
  Timer timer(stream, clock_khz, context.l2_bytes);
  const bool graph = timing != Timing::eager;

  // The roofline: one copy of 1 GiB (read + written), before and after the kernels.
  DeviceMemory copy_source(static_cast<std::size_t>(kCopyBytes), false);
  DeviceMemory copy_destination(static_cast<std::size_t>(kCopyBytes), false);
  cuda::check(api.cuMemsetD8(copy_source.address(), 0x5A, copy_source.bytes()), "cuMemsetD8");
  cuda::check(api.cuCtxSynchronize(), "cuCtxSynchronize");
  const std::vector<Launch> copy = {[&](cuda::Stream s) {
    cuda::check(api.cuMemcpyDtoDAsync(copy_destination.address(), copy_source.address(),
                                      copy_source.bytes(), s),
                "cuMemcpyDtoDAsync");
  }};
  const std::int64_t copy_bytes = 2 * kCopyBytes;
  const Measurement copy_before = timer.measure(copy, repetitions);

  MeasuredCases measured =
      measure_cases(selection, context, timer, copy_kernel, repetitions, timing);
  const std::vector<Row>& rows = measured.rows;
  const bool all_ok = measured.all_ok;
  const bool device_failed = measured.device_failed;
  const Measurement copy_after = device_failed ? copy_before : timer.measure(copy, repetitions);
  // The same-size copies' kernel on the roofline's bytes: how near the yardstick gets to the
  // roofline when size costs nothing.
  const Measurement kernel_copy =
      device_failed || !graph ? Measurement{}
                              : same_size_copy(timer, copy_kernel, copy_bytes, 1, repetitions);
  const double copy_gbps = std::max(gigabytes_per_second(copy_bytes, copy_before.median_us),
                                    gigabytes_per_second(copy_bytes, copy_after.median_us));

  nlohmann::ordered_json json;
  json["impl"] = "zerojit";
  json["device"] = device.name;
  json["l2_bytes"] = context.l2_bytes;
  json["repetitions"] = repetitions;
  json["copy"] = {{"bytes", copy_bytes},
                  {"median_us_start", copy_before.median_us},
                  {"median_us_end", copy_after.median_us},
                  {"gbps_start", gigabytes_per_second(copy_bytes, copy_before.median_us)},
                  {"gbps_end", gigabytes_per_second(copy_bytes, copy_after.median_us)},
                  {"copy_kernel_graph_us", kernel_copy.median_us}};
  json["copy_gbps"] = copy_gbps;
  json["records"] = nlohmann::ordered_json::array();

  print_rows(rows, copy_gbps, json["records"]);
  print_copies(copy_bytes, copy_before, copy_after, kernel_copy, copy_gbps);
  print_bytes_moved(rows, copy_gbps);

  if (!json_path.empty()) {
    std::ofstream file(json_path);
    if (!file) throw std::runtime_error("cannot write " + json_path);
    file << json.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  api.cuStreamDestroy(stream);
  std::printf("total %.1f s%s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count(),
              all_ok ? "" : "; SOME CASES FAILED (see above)");
  return all_ok ? 0 : 1;
}

}  // namespace zerojit::bench

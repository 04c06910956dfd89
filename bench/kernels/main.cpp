// Achieved memory bandwidth of every DSv4 kernel at three sizes (five for the C128 stores),
// against a device-to-device copy measured in the same run (docs/BENCHMARKS.md, "Kernel
// bandwidth"). bench/torch_composite.py times the same math as a PyTorch eager composite on
// inputs of the same shapes and distributions; bench/plot_bandwidth.py draws both.
//
//   zerojit_bench_kernels [--json PATH] [--kernels LIST] [--sizes LIST] [--repeat N]
//                         [--timing eager|graph|both]
//   zerojit_bench_kernels --dry-run [--kernels LIST] [--sizes LIST] [--compile-arch ARCH]
//
// A dry run needs no GPU: it builds every case in host memory, checks its arguments with the
// kernel's plan, compiles the planned keys (sm_90a by default), the timing spin and the same-size
// copy kernel with NVRTC, runs the CPU reference on the first input set and applies the write check
// below to it.
//
// Sizes: `small` is a decode step (a few dozen tokens), `serving` the default
// max_num_batched_tokens (8192 tokens), `large` a prefill big enough to move several times the
// L2 cache (64k-256k tokens, or many gathered rows).
//
// Method (the same in torch_composite.py):
//  * Inputs are random and valid (tests/dsv4/support/, the GPU tests' inputs): permuted block
//    tables, prefill chunks where 1 token in 4 (C4) or 128 (C128) is a compress boundary,
//    decode steps with a share of boundary tokens, gathers of several thousand rows per
//    request.
//  * Bytes are the fewest a kernel must move: each input it needs read once, each output
//    written once (the formula of every kernel is below, in its builder, and in the output).
//    For the compressors that is what the active (boundary) tokens need - state rows read,
//    rows written - plus the per-token metadata of every token. A gather of 4-byte values
//    (the DCP pack's logits) still moves whole 32-byte sectors: for such a case the program
//    also counts the distinct sectors its indices touch and prints the bandwidth on those.
//  * The first launch compiles and loads (warmup, not timed). Then each repetition enqueues a
//    short GPU spin (no memory traffic), a start event, the launch and an end event, so the
//    host's launch cost hides behind the spin and the events time the kernel alone. Median
//    and minimum of the repetitions.
//  * Cases whose bytes would fit in the L2 rotate among several copies of their inputs (same
//    bytes at other addresses, up to 16), so that most repetitions read from DRAM; the number
//    of copies is reported as `sets`. Decode-sized cases stay L2-resident all the same: they
//    measure latency, not bandwidth.
//  * The copy roofline is cuMemcpyDtoDAsync of 1 GiB (bytes read + written), timed the same
//    way at the start and at the end of the run; the faster of the two is the roofline.
//  * With graph timing, each case is also set against a copy of its own bytes (half read, half
//    written, one copy per input set, by a plain copy kernel on the SMs: a captured memcpy
//    becomes a slower copy-engine node) replayed the same way: `copy_us`, and `size%` = copy_us /
//    graph_us. A single launch of a mid-sized case pays fixed costs the 1 GiB roofline does not
//    (the graph's start, one launch's ramp-up and tail, the flush's dirty L2 lines written
//    back), so size% says how far a kernel is from what memory allows at that size.
//  * After timing, the outputs of the first input set (poisoned with 0xA5 before the warmup)
//    are read back: the bytes that changed must be at most the bytes the case should write and
//    at least 90 % of them (a stray code may equal 0xA5). This catches a case whose metadata
//    left every token inactive, which would report an absurd bandwidth.
//
// The harness is bench/kernels/ (cases, device memory, timing, dry run, report); each kernel's
// cases are bench/dsv4/<kernel>.cpp, registered by a static registrar (cases.hpp).
//
// Exit codes: 0 = measured, every write check passed; 1 = an error or a failed write check;
// 77 = no CUDA device (the message says why; nothing measured, no JSON written).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/harness.hpp"

namespace zerojit::bench {

namespace {

constexpr int kSkipExitCode = 77;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

std::vector<std::string> select(const std::string& option, const std::vector<std::string>& known,
                                const char* what) {
  if (option.empty() || option == "all") return known;
  std::vector<std::string> chosen;
  for (const std::string& item : split_list(option)) {
    if (std::find(known.begin(), known.end(), item) == known.end()) {
      std::string list;
      for (const std::string& name : known) list += (list.empty() ? "" : ", ") + name;
      throw std::invalid_argument(std::string("unknown ") + what + " '" + item +
                                  "' (known: " + list + ")");
    }
    chosen.push_back(item);
  }
  // Keep the canonical order.
  std::vector<std::string> ordered;
  for (const std::string& name : known) {
    if (std::find(chosen.begin(), chosen.end(), name) != chosen.end()) ordered.push_back(name);
  }
  return ordered;
}

// "comma-separated sizes, or all: ...", saying which kernels have the sizes not every kernel
// has ("(dense, dense_large: c128_store c128_store_full only)").
std::string size_help(const std::vector<KernelCases>& kernels,
                      const std::vector<std::string>& sizes) {
  std::string help = "comma-separated sizes, or all:";
  for (const std::string& size : sizes) help += " " + size;
  std::vector<std::pair<std::string, std::string>> partial;  // sizes, the kernels that have them
  for (const std::string& size : sizes) {
    std::string owners;
    std::size_t count = 0;
    for (const KernelCases& kernel : kernels) {
      if (std::find(kernel.sizes.begin(), kernel.sizes.end(), size) == kernel.sizes.end()) continue;
      owners += (owners.empty() ? "" : " ") + kernel.kernel;
      ++count;
    }
    if (count == kernels.size()) continue;
    if (!partial.empty() && partial.back().second == owners) {
      partial.back().first += ", " + size;
    } else {
      partial.emplace_back(size, owners);
    }
  }
  std::string only;
  for (const auto& [names, owners] : partial) {
    only += (only.empty() ? "" : "; ") + names + ": " + owners + " only";
  }
  return only.empty() ? help : help + " (" + only + ")";
}

}  // namespace

Case make_case(const KernelCases& kernel, const std::string& size, const Context& context) {
  if (std::find(kernel.sizes.begin(), kernel.sizes.end(), size) == kernel.sizes.end()) return {};
  return kernel.make(size, context);
}

double gigabytes_per_second(std::int64_t bytes, double microseconds) {
  return microseconds > 0.0 ? static_cast<double>(bytes) / (microseconds * 1e3) : 0.0;
}

int dry_run(const Selection& selection, const std::string& compile_arch) {
  Context context;
  context.dry_run = true;
  std::printf("dry run: host memory, each kernel's plan and CPU reference; nothing is timed\n");
  if (compile_arch != "none") {
    if (nvrtc_available()) {
      context.compile_arch = compile_arch;
      SpinKernel spin;
      spin.compile(SpinKey{}, compile_arch);
      CopyKernel copy;
      copy.compile(CopyKey{}, compile_arch);
      std::printf("every planned key, the timing spin and the copy kernel are compiled for %s\n",
                  compile_arch.c_str());
    } else {
      std::printf("no NVRTC (%s): keys not compiled\n", nvrtc_unavailable_reason().c_str());
    }
  }
  std::printf("%-16s %-8s %8s %7s %10s %4s %12s %12s %7s %7s\n", "kernel", "size", "tokens",
              "active", "MB", "sets", "to_write", "changed", "build_s", "ref_s");
  bool all_ok = true;
  for (const KernelCases& kernel : selection.kernels) {
    for (const std::string& size : selection.sizes) {
      const auto start = std::chrono::steady_clock::now();
      Case c = make_case(kernel, size, context);
      if (c.kernel.empty()) continue;
      const auto built = std::chrono::steady_clock::now();
      for (const Launch& launch : c.launches) launch(nullptr);
      const std::int64_t changed = c.sets.front().changed_output_bytes();
      const bool ok = write_check_passes(changed, c.written_bytes);
      all_ok = all_ok && ok;
      const auto done = std::chrono::steady_clock::now();
      std::printf("%-16s %-8s %8lld %7s %10.3f %4zu %12lld %12lld %7.2f %7.2f%s\n",
                  c.kernel.c_str(), c.size.c_str(), static_cast<long long>(c.tokens),
                  c.active_tokens >= 0 ? std::to_string(c.active_tokens).c_str() : "-",
                  static_cast<double>(c.bytes) / 1e6, c.sets.size(),
                  static_cast<long long>(c.written_bytes), static_cast<long long>(changed),
                  std::chrono::duration<double>(built - start).count(),
                  std::chrono::duration<double>(done - built).count(),
                  ok ? "" : "  WRITE CHECK FAILED");
      if (c.sector_bytes > 0) {
        std::printf("%-16s %-8s %8s %7s %10.3f  (at 32-byte sector granularity)\n", "", "", "", "",
                    static_cast<double>(c.sector_bytes) / 1e6);
      }
      std::fflush(stdout);
    }
  }
  std::printf("dry run: %s\n", all_ok ? "every write check passed" : "SOME WRITE CHECKS FAILED");
  return all_ok ? 0 : 1;
}

}  // namespace zerojit::bench

int main(int argc, char** argv) {
  using namespace zerojit::bench;
  namespace cuda = zerojit::cuda;
  CLI::App app{
      "Achieved bandwidth of the DSv4 kernels at small, serving and large sizes, against a "
      "device-to-device copy in the same run. Exit code 77: no CUDA device."};
  std::string json_path;
  std::string kernels = "all";
  std::string sizes = "all";
  int repetitions = 50;
  bool dry = false;
  std::string compile_arch = "sm_90a";
  const std::vector<KernelCases> registered = registered_kernels();
  std::vector<std::string> kernel_names, size_names;
  for (const KernelCases& kernel : registered) {
    kernel_names.push_back(kernel.kernel);
    for (const std::string& size : kernel.sizes) {
      if (std::find(size_names.begin(), size_names.end(), size) == size_names.end()) {
        size_names.push_back(size);
      }
    }
  }
  std::string kernel_help = "comma-separated kernels, or all:";
  for (const std::string& name : kernel_names) kernel_help += " " + name;
  app.add_option("--json", json_path, "write the records to this JSON file");
  app.add_option("--kernels", kernels, kernel_help);
  app.add_option("--sizes", sizes, size_help(registered, size_names));
  std::string timing = "both";
  app.add_option("--timing", timing,
                 "eager (one launch behind a spin), graph (CUDA-graph replay, cold L2) or both")
      ->check(CLI::IsMember({"eager", "graph", "both"}));
  app.add_option("--repeat", repetitions, "timed repetitions per case (median and min)")
      ->check(CLI::Range(1, 10000));
  app.add_flag("--dry-run", dry,
               "no GPU needed: build the cases in host memory, check each with its kernel's "
               "plan and CPU reference, time nothing");
  app.add_option("--compile-arch", compile_arch,
                 "dry run: also compile every planned key, the timing spin and the copy kernel for "
                 "this arch "
                 "with NVRTC (none: do not)");
  std::int64_t grid_x = 0;
  app.add_option("--grid-x", grid_x,
                 "tuning: launch with this grid.x instead of the plan's: c128_compress (a "
                 "multiple of 8), c4_store, c4_store_full; dequant_gather's "
                 "grid.y (workers per request). Any such grid is correct")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 30));
  CLI11_PARSE(app, argc, argv);

  try {
    Selection selection;
    for (const std::string& name : select(kernels, kernel_names, "kernel")) {
      selection.kernels.push_back(registered[static_cast<std::size_t>(
          std::find(kernel_names.begin(), kernel_names.end(), name) - kernel_names.begin())]);
    }
    selection.sizes = select(sizes, size_names, "size");
    selection.grid_x = grid_x;
    if (dry) return dry_run(selection, compile_arch);
    if (cuda::device_count() == 0) {
      std::printf("zerojit_bench_kernels: no CUDA device (%s); nothing measured\n",
                  cuda::driver_available() ? "the driver reports none"
                                           : cuda::driver_unavailable_reason().c_str());
      return kSkipExitCode;
    }
    return run(
        json_path, selection, repetitions,
        timing == "eager" ? Timing::eager : (timing == "graph" ? Timing::graph : Timing::both));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "zerojit_bench_kernels: %s\n", error.what());
    return 1;
  }
}

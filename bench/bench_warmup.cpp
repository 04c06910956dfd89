// Warmup time of the DSv4 manifests: cold (empty cache), from disk, from memory, with 1..N
// jobs, and where the time goes (NVRTC, identity hashing, the rest: loading and I/O). One
// measurement per process, so that "from disk" is measured in a process that has never loaded
// NVRTC. bench/warmup_sweep.sh runs the whole sweep.
//
//   zerojit_bench_warmup --mode cold|disk|memory --jobs N [--manifest default|union]
//                        [--cache-dir DIR] [--compile-only] [--arch sm_90a]
// Prints one JSON object.
//   zerojit_bench_warmup --mode phases [--manifest default|union] [--arch sm_90a] [--context]
//                        [--nvrtc-option OPTION]...
// First what a process pays before its first key (loading NVRTC, NVRTC's start-up, on a new
// thread, in a forked child; --context: after creating a CUDA context, as a serving process
// has), then every key compiled once in this process, no cache, with NVRTC's own timing
// (--time) on: each key's milliseconds per NVRTC phase: front end, NVVM optimizer, PTX
// translation (ptxas).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dsv4/family.hpp"
#include "zerojit/disk_cache.hpp"

namespace {

using namespace zerojit;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The default configuration, or the union of every configuration the tests exercise.
void register_manifest(WarmupRegistry& registry, const std::string& which) {
  dsv4::AttentionKernels(dsv4::default_config()).register_warmup(registry);
  if (which != "union") return;
  std::vector<dsv4::Dsv4Config> configs;
  for (auto dtype : {dsv4::KvCacheDtype::bf16, dsv4::KvCacheDtype::fp8_e4m3}) {
    configs.push_back(dsv4::default_config());
    configs.back().serving.kv_cache_dtype = dtype;
  }
  configs.push_back(dsv4::default_config());
  configs.back().serving.block_size = 64;
  configs.push_back(dsv4::default_config());
  configs.back().serving.c128_page_stride_bytes = 39168;
  configs.push_back(dsv4::default_config());
  configs.back().serving.dcp_world_size = 2;
  configs.push_back(dsv4::default_config());
  configs.back().model = dsv4::dsv4_pro();
  configs.back().serving.dcp_world_size = 8;
  configs.push_back(dsv4::default_config());
  configs.back().serving.indexer_dtype = dsv4::IndexerDtype::mxfp4;
  configs.back().serving.target_arch = "sm_100a";
  for (const auto& config : configs) dsv4::AttentionKernels(config).register_warmup(registry);
}

// NVRTC's account of one compile: milliseconds per phase, as its --time CSV gives them
// ("file, phase, value, unit" lines after a header).
std::vector<std::pair<std::string, double>> nvrtc_phases(NvrtcInput input) {
  const std::filesystem::path csv = std::filesystem::temp_directory_path() /
                                    ("zerojit-nvrtc-time-" + std::to_string(::getpid()) + ".csv");
  std::filesystem::remove(csv);
  input.options.push_back("--time=" + csv.string());
  run_nvrtc(input);
  std::vector<std::pair<std::string, double>> phases;
  std::ifstream file(csv);
  std::string line;
  std::getline(file, line);  // header
  while (std::getline(file, line)) {
    std::vector<std::string> fields;
    std::stringstream stream(line);
    for (std::string field; std::getline(stream, field, ',');) {
      field.erase(0, field.find_first_not_of(' '));
      fields.push_back(field);
    }
    if (fields.size() >= 3) phases.emplace_back(fields[1], std::atof(fields[2].c_str()));
  }
  std::filesystem::remove(csv);
  return phases;
}

void print_phase_list(const std::vector<std::pair<std::string, double>>& phases) {
  for (const auto& [phase, ms] : phases) std::printf("  %s %.0f", phase.c_str(), ms);
}

// What every compiling process pays before its first key: loading NVRTC, and NVRTC's own
// start-up inside its first compile (here of an empty kernel: the second one shows the rest),
// timed from outside; then whether a new thread or a forked child pays it again.
void print_start_up(const std::string& arch) {
  const auto load_start = Clock::now();
  const std::string version = nvrtc_version();
  const double load_ms = 1e3 * seconds_since(load_start);
  NvrtcInput empty;
  empty.kernel_name = "empty";
  empty.arch = arch;
  empty.source_path = "empty.cu";
  empty.source = "extern \"C\" __global__ void empty_kernel() {}\n";
  empty.options.assign(std::begin(kDefaultNvrtcOptions), std::end(kDefaultNvrtcOptions));
  empty.options.push_back("--gpu-architecture=" + arch);
  std::printf("NVRTC %s loaded in %.1f ms; an empty kernel compiles in", version.c_str(), load_ms);
  for (const char* which : {"first", "second"}) {
    const auto start = Clock::now();
    run_nvrtc(empty);
    std::printf(" %.1f ms (%s)", 1e3 * seconds_since(start), which);
  }
  const auto start = Clock::now();
  const auto phases = nvrtc_phases(empty);
  std::printf(", %.1f ms with --time (", 1e3 * seconds_since(start));
  print_phase_list(phases);
  std::printf(" )\n");
  auto time_on_new_thread = [&] {
    double ms = 0.0;
    std::thread([&] {
      const auto thread_start = Clock::now();
      run_nvrtc(empty);
      ms = 1e3 * seconds_since(thread_start);
    }).join();
    return ms;
  };
  std::printf("  on a new thread: %.1f ms, again on another: %.1f ms\n", time_on_new_thread(),
              time_on_new_thread());
  std::fflush(stdout);
  const pid_t child = ::fork();
  if (child < 0) {
    std::printf("  (fork failed: %s)\n", std::strerror(errno));
    return;
  }
  if (child == 0) {
    const auto child_start = Clock::now();
    run_nvrtc(empty);
    const double first = 1e3 * seconds_since(child_start);
    std::printf("  in a forked child: %.1f ms, on a new thread of it: %.1f ms\n", first,
                time_on_new_thread());
    std::fflush(stdout);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
}

// --mode phases: each key once, in this process, slowest first.
int print_phases(const WarmupRegistry& registry, const std::string& arch,
                 const std::vector<std::string>& extra_options) {
  print_start_up(arch);
  struct Row {
    double total_ms = 0.0;
    std::vector<std::pair<std::string, double>> phases;
    std::string name;
  };
  std::vector<Row> rows;
  std::map<std::string, double> sums;
  for (const auto& entry : registry.manifest().entries) {
    Row row;
    NvrtcInput input = make_nvrtc_input(entry.program(), arch);
    input.options.insert(input.options.end(), extra_options.begin(), extra_options.end());
    row.phases = nvrtc_phases(std::move(input));
    for (const auto& [phase, ms] : row.phases) {
      row.total_ms += ms;
      sums[phase] += ms;
    }
    row.name = std::string(entry.kernel->name()) + " " + entry.key_text;
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.total_ms > b.total_ms; });
  for (const Row& row : rows) {
    std::printf("%7.1f ms =", row.total_ms);
    print_phase_list(row.phases);
    std::printf("  | %s\n", row.name.c_str());
  }
  std::printf("sum over %zu keys:", rows.size());
  for (const auto& [phase, ms] : sums) std::printf("  %s %.0f ms", phase.c_str(), ms);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "cold", manifest_name = "default", cache_dir, arch = "sm_90a";
  int jobs = 0;
  bool compile_only = false;
  bool per_key = false;
  bool processes = false;  // compile in forked worker processes (WarmupOptions::compile_processes)
  bool with_context = false;               // --mode phases: create a CUDA context first
  std::vector<std::string> extra_options;  // --mode phases: added to every key's NVRTC options
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (arg == "--mode")
      mode = value();
    else if (arg == "--jobs")
      jobs = std::atoi(value().c_str());
    else if (arg == "--manifest")
      manifest_name = value();
    else if (arg == "--cache-dir")
      cache_dir = value();
    else if (arg == "--arch")
      arch = value();
    else if (arg == "--compile-only")
      compile_only = true;
    else if (arg == "--per-key")
      per_key = true;
    else if (arg == "--processes")
      processes = true;
    else if (arg == "--context")
      with_context = true;
    else if (arg == "--nvrtc-option")
      extra_options.push_back(value());
    else {
      std::fprintf(stderr,
                   "usage: %s --mode cold|disk|memory|phases --jobs N [--manifest default|union] "
                   "[--cache-dir DIR] [--compile-only] [--arch ARCH] [--per-key] [--processes] "
                   "[--context] [--nvrtc-option OPTION]...\n",
                   argv[0]);
      return 2;
    }
  }
  if (mode == "phases") {
    if (with_context && cuda::device_count() > 0) {
      const auto context_start = Clock::now();
      cuda::make_device_current(0);
      std::printf("context created in %.1f ms\n", 1e3 * seconds_since(context_start));
    }
    WarmupRegistry registry;
    register_manifest(registry, manifest_name);
    return print_phases(registry, arch, extra_options);
  }
  if (mode != "memory" && cache_dir.empty()) {
    std::fprintf(stderr, "--cache-dir is required for --mode %s\n", mode.c_str());
    return 2;
  }
  if (mode == "memory") {
    Runtime::instance().set_artifact_store(nullptr);
  } else {
    DiskCacheOptions options;
    options.root = cache_dir;
    Runtime::instance().set_artifact_store(std::make_shared<DiskCache>(options));
  }
  WarmupRegistry registry;
  register_manifest(registry, manifest_name);
  WarmupOptions options;
  options.jobs = jobs;
  options.arch = arch;
  options.compile_only = compile_only;
  options.compile_processes = processes;
  options.progress = ProgressStyle::none;
  options.arm_monitor = false;
  if (mode == "memory") registry.warmup(options);  // fill the in-memory tier first
  // A serving process has its CUDA context before it warms up: create it outside the timing
  // (creating a context costs ~0.1-0.2 s and is no part of warmup).
  if (!compile_only && cuda::device_count() > 0) {
    for (int device = 0; device < cuda::device_count(); ++device) cuda::make_device_current(device);
  }

  // Identity hashing of the whole manifest, measured on its own.
  const Manifest manifest = registry.manifest();
  const auto hash_start = Clock::now();
  // From the disk cache's memo when every key is on disk: NVRTC stays unloaded.
  const std::string nvrtc = Runtime::instance().nvrtc_version();
  for (const auto& entry : manifest.entries) {
    volatile auto words = compute_identity(entry.program(), arch, nvrtc).words[0];
    (void)words;
  }
  const double hash_seconds = seconds_since(hash_start);

  const auto start = Clock::now();
  const WarmupReport report = registry.warmup(options);
  const double wall = seconds_since(start);
  double nvrtc_seconds = 0.0;
  for (const auto& key : report.keys) nvrtc_seconds += key.compile_seconds;
  std::printf(
      "{\"mode\":\"%s\",\"manifest\":\"%s\",\"jobs\":%d,\"keys\":%d,\"compiled\":%d,"
      "\"from_disk\":%d,\"from_memory\":%d,\"failed\":%d,\"devices\":%zu,\"wall_seconds\":%.6f,"
      "\"nvrtc_seconds_sum\":%.6f,\"identity_hash_seconds\":%.6f,\"nvrtc_loaded\":%s,"
      "\"compile_workers\":%d,\"deferred\":%d}\n",
      mode.c_str(), manifest_name.c_str(), jobs <= 0 ? default_job_count() : jobs,
      report.total_keys(), report.compiled(), report.from_disk(), report.from_memory(),
      report.failed(), report.devices.size(), wall, nvrtc_seconds, hash_seconds,
      nvrtc_loaded() ? "true" : "false", report.compile_workers, report.deferred);
  if (per_key) {  // where the time goes, slowest first
    std::vector<const KeyReport*> keys;
    for (const auto& key : report.keys) keys.push_back(&key);
    std::sort(keys.begin(), keys.end(), [](const KeyReport* a, const KeyReport* b) {
      return a->compile_seconds > b->compile_seconds;
    });
    for (const KeyReport* key : keys) {
      std::printf("  %8.3f s compile  %8.3f s total  %s %s\n", key->compile_seconds, key->seconds,
                  key->kernel.c_str(), key->key.c_str());
    }
  }
  return report.ok() ? 0 : 3;
}

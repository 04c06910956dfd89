// Warmup time of the DSv4 manifests: cold (empty cache), from disk, from memory, with 1..N
// jobs, and where the time goes (NVRTC, identity hashing, the rest: loading and I/O). One
// measurement per process, so that "from disk" is measured in a process that has never loaded
// NVRTC. bench/warmup_sweep.sh runs the whole sweep.
//
//   zerojit_bench_warmup --mode cold|disk|memory --jobs N [--manifest default|union]
//                        [--cache-dir DIR] [--compile-only] [--arch sm_90a]
// Prints one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dsv4/model.hpp"
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

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "cold", manifest_name = "default", cache_dir, arch = "sm_90a";
  int jobs = 0;
  bool compile_only = false;
  bool per_key = false;
  bool processes = false;  // compile in forked worker processes (WarmupOptions::compile_processes)
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (arg == "--mode") mode = value();
    else if (arg == "--jobs") jobs = std::atoi(value().c_str());
    else if (arg == "--manifest") manifest_name = value();
    else if (arg == "--cache-dir") cache_dir = value();
    else if (arg == "--arch") arch = value();
    else if (arg == "--compile-only") compile_only = true;
    else if (arg == "--per-key") per_key = true;
    else if (arg == "--processes") processes = true;
    else {
      std::fprintf(stderr, "usage: %s --mode cold|disk|memory --jobs N [--manifest default|union] "
                   "[--cache-dir DIR] [--compile-only] [--arch ARCH] [--per-key] [--processes]\n", argv[0]);
      return 2;
    }
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
      "\"compile_workers\":%d}\n",
      mode.c_str(), manifest_name.c_str(), jobs <= 0 ? default_job_count() : jobs,
      report.total_keys(), report.compiled(), report.from_disk(), report.from_memory(),
      report.failed(), report.devices.size(), wall, nvrtc_seconds, hash_seconds,
      nvrtc_loaded() ? "true" : "false", report.compile_workers);
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

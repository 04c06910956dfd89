// A process of the disk-cache tests: warms the example kernels (compile only) against a given
// cache and prints what happened as one JSON object on standard output. The tests start many
// of these at once, kill them at random moments, and run them under resource limits.
//
//   zerojit_cache_worker --cache-dir DIR [--layer DIR]... [--max-bytes N] [--allow-shared]
//                        [--lock-timeout-ms N] [--file-size-limit N] [--drop-write-override]
//                        [--arch ARCH] [--jobs N] [--hold-lock INDEX] [--progress-lines]
//
// --drop-write-override: when running as root, drop the capabilities that let root write
//   where file modes forbid it, so that a read-only directory is read-only for this process.
// --hold-lock INDEX: take the cache lock of manifest entry INDEX, print {"locked":true}, and
//   sleep until killed (a compiling process that dies holding its lock).
// --progress-lines: print {"done":N,"kernel":...,"key":...,"origin":...} as each key is done,
//   in the order they finish (a test reads the order while the warmup still runs).
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "examples/examples.hpp"
#include "zerojit/bytes.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/zerojit.hpp"

namespace {

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "cache_worker: %s\n", problem.c_str());
  std::exit(2);
}

bool drop_write_override() {
  if (::geteuid() != 0) return true;
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  for (int capability : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER}) {
    const auto bit = 1u << (capability % 32);
    data[capability / 32].effective &= ~bit;
    data[capability / 32].permitted &= ~bit;
  }
  return ::syscall(SYS_capset, &header, data) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  zerojit::DiskCacheOptions options;
  std::string arch = "sm_90a";
  int jobs = 2;
  int hold_lock = -1;
  long long file_size_limit = -1;
  bool drop_override = false;
  bool progress_lines = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "--cache-dir") {
      options.root = value();
    } else if (arg == "--layer") {
      options.read_only_layers.emplace_back(value());
    } else if (arg == "--max-bytes") {
      options.max_bytes = zerojit::parse_byte_size_or_throw(value(), "--max-bytes");
    } else if (arg == "--allow-shared") {
      options.allow_shared_root = true;
    } else if (arg == "--lock-timeout-ms") {
      options.lock_timeout = std::chrono::milliseconds(std::stoll(value()));
    } else if (arg == "--file-size-limit") {
      file_size_limit = std::stoll(value());
    } else if (arg == "--drop-write-override") {
      drop_override = true;
    } else if (arg == "--arch") {
      arch = value();
    } else if (arg == "--jobs") {
      jobs = std::stoi(value());
    } else if (arg == "--hold-lock") {
      hold_lock = std::stoi(value());
    } else if (arg == "--progress-lines") {
      progress_lines = true;
    } else {
      usage("unknown argument " + std::string(arg));
    }
  }
  if (drop_override && !drop_write_override()) {
    usage(std::string("cannot drop capabilities: ") + std::strerror(errno));
  }
  rlimit original_limit{};
  ::getrlimit(RLIMIT_FSIZE, &original_limit);
  if (file_size_limit >= 0) {
    // Writes past the limit then fail with EFBIG instead of killing the process. Only the
    // soft limit is lowered, so that it can be lifted again to print the result.
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{static_cast<rlim_t>(file_size_limit), original_limit.rlim_max};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) usage("setrlimit failed");
  }

  std::vector<std::string> warnings;
  std::mutex warnings_mutex;
  options.warning_sink = [&](std::string_view line) {
    std::lock_guard lock(warnings_mutex);
    warnings.emplace_back(line);
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  };
  auto cache = std::make_shared<zerojit::DiskCache>(options);
  zerojit::Runtime::instance().set_artifact_store(cache);

  zerojit::WarmupRegistry registry;
  zerojit::examples::register_examples(registry);
  const zerojit::Manifest manifest = registry.manifest();

  if (hold_lock >= 0) {
    const zerojit::ProgramIdentity identity = zerojit::compute_identity(
        manifest.entries.at(static_cast<std::size_t>(hold_lock)).program(), arch,
        zerojit::Runtime::instance().nvrtc_version());
    auto guard = cache->lock(identity);
    std::printf("{\"locked\":%s,\"identity\":\"%s\"}\n", guard ? "true" : "false",
                identity.hex().c_str());
    std::fflush(stdout);
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  }

  zerojit::WarmupOptions warmup;
  warmup.arch = arch;
  warmup.compile_only = true;
  warmup.jobs = jobs;
  warmup.progress = zerojit::ProgressStyle::none;
  warmup.arm_monitor = false;
  if (progress_lines) {
    warmup.on_progress = [](const zerojit::WarmupProgress& progress) {
      const zerojit::KeyReport& key = *progress.key;
      const nlohmann::ordered_json line = {
          {"done", progress.done},
          {"kernel", key.kernel},
          {"key", key.key},
          {"origin", key.error.empty() ? zerojit::to_string(key.origin) : "failed"}};
      std::printf("%s\n", line.dump().c_str());
      std::fflush(stdout);
    };
  }
  const zerojit::WarmupReport report = registry.warmup(warmup);
  ::setrlimit(RLIMIT_FSIZE, &original_limit);  // standard output may be a file

  using Json = nlohmann::ordered_json;
  const zerojit::DiskCacheCounters c = cache->counters();
  Json out = {{"ok", report.ok()},
              {"keys", report.total_keys()},
              {"compiled", report.compiled()},
              {"from_disk", report.from_disk()},
              {"from_memory", report.from_memory()},
              {"failed", report.failed()},
              {"deferred", report.deferred},
              {"nvrtc_loaded", zerojit::nvrtc_loaded()},
              {"state", zerojit::to_string(cache->state())},
              {"counters",
               {{"hits", c.hits},
                {"misses", c.misses},
                {"bad_entries", c.bad_entries},
                {"published", c.published},
                {"write_failures", c.write_failures},
                {"evicted", c.evicted},
                {"lock_waits", c.lock_waits},
                {"lock_timeouts", c.lock_timeouts},
                {"skipped_identities", c.skipped_identities},
                {"not_saved", c.not_saved}}}};
  Json errors = Json::array();
  for (const auto& key : report.keys) {
    if (!key.error.empty()) errors.push_back(key.error);
  }
  out["errors"] = std::move(errors);
  {
    std::lock_guard lock(warnings_mutex);
    out["warnings"] = warnings;
  }
  Json identities = Json::array();
  try {
    const std::string nvrtc = zerojit::Runtime::instance().nvrtc_version();
    out["nvrtc_version"] = nvrtc;
    for (const zerojit::ManifestEntry& entry : manifest.entries) {
      identities.push_back(
          {{"kernel", entry.kernel->name()},
           {"key", entry.key_text},
           {"identity", zerojit::compute_identity(entry.program(), arch, nvrtc).hex()}});
    }
  } catch (const zerojit::UnavailableError& error) {
    out["nvrtc_version"] = nullptr;  // no NVRTC and no single version recorded: no identities
    out["nvrtc_error"] = error.what();
  }
  out["identities"] = std::move(identities);
  const std::string text = out.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::printf("%s\n", text.c_str());
  return report.ok() ? 0 : 1;
}

// Configurations, manifests and warmup of the DSv4 family; the JIT monitor; the disk cache.
// Structured results cross into Python as the JSON the command-line tool prints, so the two
// front ends cannot drift apart; the Python layer parses it into dicts.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "dsv4/family.hpp"
#include "environment.hpp"
#include "py_kernel.hpp"
#include "zerojit/background.hpp"
#include "zerojit/disk_cache.hpp"
#include "zerojit/misses.hpp"
#include "zerojit/zerojit.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

using nlohmann::json;

// The model and serving configuration a call names. `model` is a preset name, a config.json
// path or a directory holding one; `model_json` a Hugging Face style document (exclusive with
// `model`); `serving_json` the serving options as JSON (missing keys keep their defaults).
dsv4::Dsv4Config resolve_config(const std::optional<std::string>& model,
                                const std::optional<std::string>& model_json,
                                const std::optional<std::string>& serving_json) {
  dsv4::Dsv4Config config;
  try {
    if (model_json) {
      config.model = dsv4::model_config_from_json(json::parse(*model_json), "model dict");
    } else {
      config.model = dsv4::model_from_name_or_path(model.value_or("dsv4-flash"));
    }
    if (serving_json) config.serving = json::parse(*serving_json).get<dsv4::ServingConfig>();
  } catch (const json::exception& error) {
    throw dsv4::ConfigError(std::string("DSv4 config: ") + error.what());
  }
  dsv4::validate_for_kernels(config);
  return config;
}

std::string config_json(const std::optional<std::string>& model,
                        const std::optional<std::string>& model_json,
                        const std::optional<std::string>& serving_json) {
  return json(resolve_config(model, model_json, serving_json)).dump();
}

// (kernel, key text, key JSON) for each key warmup would compile, in manifest order.
std::vector<std::tuple<std::string, std::string, std::string>> manifest(
    const std::optional<std::string>& model, const std::optional<std::string>& model_json,
    const std::optional<std::string>& serving_json) {
  const dsv4::AttentionKernels kernels(resolve_config(model, model_json, serving_json));
  WarmupRegistry registry;
  kernels.register_warmup(registry);
  std::vector<std::tuple<std::string, std::string, std::string>> entries;
  for (const ManifestEntry& entry : registry.manifest().entries) {
    entries.emplace_back(entry.kernel->name(), entry.key_text, entry.key_json);
  }
  return entries;
}

ProgressStyle parse_progress(const std::string& text) {
  if (text == "auto") return ProgressStyle::automatic;
  if (text == "bar") return ProgressStyle::bar;
  if (text == "lines") return ProgressStyle::lines;
  if (text == "none") return ProgressStyle::none;
  throw InvalidArgument("warmup", "progress",
                        "must be 'auto', 'bar', 'lines' or 'none', got '" + text + "'");
}

// Loading modules makes each device's context current in turn; the caller's (PyTorch's idea
// of the current device) is put back afterwards.
class KeepCurrentContext {
 public:
  KeepCurrentContext() {
    if (!cuda::driver_available()) return;
    api_ = &cuda::driver();
    if (api_->cuCtxGetCurrent(&context_) != cuda::kSuccess) context_ = nullptr;
  }
  ~KeepCurrentContext() {
    if (context_ != nullptr) api_->cuCtxSetCurrent(context_);
  }
  KeepCurrentContext(const KeepCurrentContext&) = delete;
  KeepCurrentContext& operator=(const KeepCurrentContext&) = delete;

 private:
  const cuda::DriverApi* api_ = nullptr;
  cuda::Context context_ = nullptr;
};

// Compiles (and loads) every key the configuration's kernels can ask for, with the registered
// Python kernels' keys (`kernels`, expanded by the caller) in the same pool; `dsv4` false
// leaves the DSv4 family out. Returns the report as JSON and its one-line summary.
std::tuple<std::string, std::string> warmup(
    const std::optional<std::string>& model, const std::optional<std::string>& model_json,
    const std::optional<std::string>& serving_json, const std::vector<int>& devices, int jobs,
    bool compile_only, const std::optional<std::string>& arch, const std::string& progress,
    bool arm_monitor, bool compile_processes, const py::object& kernels_list, bool dsv4_family,
    const py::object& on_key, const std::vector<std::tuple<std::string, std::string>>& learned) {
  const dsv4::AttentionKernels kernels(resolve_config(model, model_json, serving_json));
  WarmupRegistry registry;
  if (dsv4_family) kernels.register_warmup(registry);
  add_dynamic_registrations(registry, dynamic_registrations(kernels_list));
  // Learned misses of the C++ kernels (warmup.py reads the files and keeps the Python kernels'):
  // each rebuilt from its key text by its kernel; the report's "learned_skipped" names the
  // others, for warmup.py's warning.
  MissesFile misses;
  for (const auto& [kernel, key_text] : learned) misses.misses.push_back({kernel, key_text});
  const std::vector<std::string> skipped = registry.add_learned(misses);
  // Outlives the GIL's release below: it is polled while the keys compile, and raised after.
  WarmupInterrupt interrupt;
  WarmupOptions options;
  options.on_progress = progress_bridge(on_key, interrupt);
  options.cancel_requested = [&interrupt] { return interrupt.requested(); };
  options.arch = arch.value_or(kernels.config().serving.target_arch);
  options.devices = devices;
  options.compile_only = compile_only;
  options.jobs = jobs;
  options.progress = parse_progress(progress);
  options.arm_monitor = arm_monitor;
  options.compile_processes = compile_processes;
  WarmupReport report;
  {
    py::gil_scoped_release release;
    const KeepCurrentContext keep_context;
    report = registry.warmup(options);
  }
  interrupt.raise_if_interrupted();  // Ctrl-C: a KeyboardInterrupt, once the keys in flight end
  if (skipped.empty()) return {report.to_json(), report.summary_line()};
  nlohmann::ordered_json document = nlohmann::ordered_json::parse(report.to_json());
  document["learned_skipped"] = skipped;
  return {document.dump(), report.summary_line()};
}

// --- Monitor -------------------------------------------------------------------------------

void set_monitor_mode(const std::string& text) {
  const std::optional<MonitorMode> mode = parse_monitor_mode(text);
  if (!mode) {
    throw InvalidArgument("monitor", "mode",
                          "must be 'off', 'warn', 'error' or 'fallback', got '" + text + "'");
  }
  Monitor::instance().set_mode(*mode);
}

std::string monitor_counters_json() {
  // Every DSv4 owner is created here, so the counters list the whole family even before the
  // first call reaches a kernel.
  (void)dsv4::all_kernels();
  return Monitor::instance().counters_json();
}

// The metric families (zerojit/metrics.hpp) as (name, type, help, [(labels, value)]), for
// zerojit.PrometheusCollector: a client library's families from the values themselves.
using MetricRows = std::vector<
    std::tuple<std::string, std::string, std::string,
               std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, double>>>>;

MetricsSnapshot live_metrics() {
  // As monitor_counters_json: every DSv4 owner exists, so a scrape lists the whole family.
  (void)dsv4::all_kernels();
  return metrics_snapshot();
}

MetricRows metric_family_rows() {
  MetricRows rows;
  for (MetricFamily& family : metric_families(live_metrics())) {
    std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, double>> samples;
    for (MetricSample& sample : family.samples) {
      samples.emplace_back(std::move(sample.labels), sample.value);
    }
    rows.emplace_back(std::move(family.name), std::move(family.type), std::move(family.help),
                      std::move(samples));
  }
  return rows;
}

std::vector<std::tuple<std::string, std::string, std::string, std::string>> monitor_events() {
  std::vector<std::tuple<std::string, std::string, std::string, std::string>> events;
  for (const JitEvent& event : Monitor::instance().events()) {
    events.emplace_back(std::string(to_string(event.kind)), event.kernel, event.key,
                        event.descriptors);
  }
  return events;
}

// --- Disk cache ------------------------------------------------------------------------------

// A cache handle for the management operations: the default root (or `root`), never creating
// a missing one, so a mistyped directory is not made.
std::unique_ptr<DiskCache> open_cache(const std::optional<std::string>& root) {
  DiskCacheOptions options = default_disk_cache_options(MalformedVariable::warn);
  if (root) options.root = *root;
  if (options.root.empty()) {
    throw Error("no cache directory: pass one, or set ZEROJIT_CACHE_DIR, XDG_CACHE_HOME or HOME");
  }
  options.create_root = false;
  return std::make_unique<DiskCache>(std::move(options));
}

// Installs the store the runtime compiles through: None = the default from the environment,
// "off" = no writable root, else a disk cache rooted there. The read-only layers of
// ZEROJIT_CACHE_READONLY_DIRS are read in every case (with "off" and none named: memory
// only); a malformed cache variable is warned about and the others apply. `root` holds the
// path's bytes (os.fsencode), so a path that is not UTF-8 works as in the tool. The remote tier
// of ZEROJIT_REMOTE_CACHE stays in front of whatever is chosen, as in the default store.
void set_cache_dir(const std::optional<std::string>& root) {
  if (!root) {
    Runtime::instance().set_artifact_store(make_default_artifact_store());
    return;
  }
  DiskCacheOptions options = default_disk_cache_options(MalformedVariable::warn);
  if (*root == "off") {
    if (options.read_only_layers.empty()) {
      Runtime::instance().set_artifact_store(with_remote_cache_from_environment(nullptr));
      return;
    }
    options.root.clear();
  } else {
    options.root = *root;
  }
  Runtime::instance().set_artifact_store(
      with_remote_cache_from_environment(std::make_shared<DiskCache>(std::move(options))));
}

// Words for people, from text that may hold a path's bytes: U+FFFD where they are not UTF-8,
// as in the tool's --json documents (a str converted by pybind11 would raise instead).
py::str words(const std::string& text) {
  PyObject* decoded =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (decoded == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(decoded);
}

py::str cache_describe() {
  const std::shared_ptr<ArtifactStore> store = Runtime::instance().artifact_store();
  return words(store ? store->describe() : "memory only (no disk cache)");
}

// A path, as os.fsdecode gives it: bytes that are not UTF-8 become surrogate escapes, so the
// str names the same file.
py::object cache_default_root() {
  const std::optional<std::filesystem::path> root = default_cache_root();
  if (!root || root->empty()) return py::none();
  const std::string& path = root->native();
  PyObject* decoded =
      PyUnicode_DecodeFSDefaultAndSize(path.data(), static_cast<Py_ssize_t>(path.size()));
  if (decoded == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(decoded);
}

}  // namespace

void bind_runtime(py::module_& module) {
  const auto config_args = [] {
    return std::tuple{py::arg("model") = py::none(), py::arg("model_json") = py::none(),
                      py::arg("serving_json") = py::none()};
  };
  const auto [model_arg, model_json_arg, serving_arg] = config_args();
  module.def("config_json", &config_json, model_arg, model_json_arg, serving_arg);
  module.def("manifest", &manifest, model_arg, model_json_arg, serving_arg);
  module.def("warmup", &warmup, model_arg, model_json_arg, serving_arg,
             py::arg("devices") = std::vector<int>{}, py::arg("jobs") = 0,
             py::arg("compile_only") = false, py::arg("arch") = py::none(),
             py::arg("progress") = "none", py::arg("arm_monitor") = true,
             py::arg("compile_processes") = false, py::arg("kernels") = py::none(),
             py::arg("dsv4") = true, py::arg("on_key") = py::none(),
             py::arg("learned") = std::vector<std::tuple<std::string, std::string>>{});

  module.def("monitor_mode", [] { return std::string(to_string(Monitor::instance().mode())); });
  module.def("set_monitor_mode", &set_monitor_mode, py::arg("mode"));
  module.def("monitor_arm", [] { Monitor::instance().arm(); });
  module.def("monitor_disarm", [] { Monitor::instance().disarm(); });
  module.def("monitor_armed", [] { return Monitor::instance().armed(); });
  module.def("monitor_verbose", [] { return Monitor::instance().verbose(); });
  module.def(
      "set_monitor_verbose", [](bool verbose) { Monitor::instance().set_verbose(verbose); },
      py::arg("verbose"));
  module.def("monitor_counters_json", &monitor_counters_json);
  module.def("monitor_events", &monitor_events);
  module.def("metrics_text", [] { return prometheus_text(metric_families(live_metrics())); });
  module.def("metric_families", &metric_family_rows);
  module.def("monitor_reset_events", [] { Monitor::instance().reset_events(); });

  module.def("set_cache_dir", &set_cache_dir, py::arg("root"));
  // Learned misses (misses.hpp): where runtime misses are recorded, and a file read back as
  // ([(kernel, key text, key JSON, descriptors, count)], ["line N: why" per skipped line]).
  module.def(
      "set_misses_file", [](std::optional<std::string> path) { set_misses_file(std::move(path)); },
      py::arg("path"));
  module.def("misses_file", [] { return misses_file(); });
  module.def(
      "read_misses",
      [](const std::string& path) {
        const MissesFile file = read_misses(path);
        std::vector<std::tuple<std::string, std::string, std::string, std::string, std::uint64_t>>
            misses;
        for (const LearnedMiss& miss : file.misses) {
          misses.emplace_back(miss.kernel, miss.key_text, miss.key_json, miss.descriptors,
                              miss.count);
        }
        return std::pair{misses, file.skipped};
      },
      py::arg("path"));
  // Waits (without the GIL: a compile may need it) until no background compile of the
  // fallback mode is queued or running, at most `timeout` seconds; whether they are done.
  module.def(
      "wait_background_compiles",
      [](double timeout) {
        const auto bound =
            std::chrono::milliseconds(static_cast<std::int64_t>(std::max(0.0, timeout) * 1000.0));
        const py::gil_scoped_release release;
        return BackgroundCompiles::instance().wait_idle(bound);
      },
      py::arg("timeout"));
  // The module's yes/no variables by the library's rule (zerojit.runtime.environment.flag).
  module.def(
      "environment_flag",
      [](const std::string& name, bool unset) {
        return detail::environment_flag(name.c_str(), unset);
      },
      py::arg("name"), py::arg("unset"));
  module.def("cache_describe", &cache_describe);
  module.def("cache_default_root", &cache_default_root);
  module.def(
      "cache_list",
      [](const std::optional<std::string>& root) { return to_json(open_cache(root)->list()); },
      py::arg("root") = py::none());
  module.def(
      "cache_verify",
      [](const std::optional<std::string>& root, bool set_aside) {
        return open_cache(root)->verify(set_aside).to_json();
      },
      py::arg("root") = py::none(), py::arg("set_aside") = false);
  module.def(
      "cache_gc",
      [](const std::optional<std::string>& root, std::optional<std::uint64_t> max_bytes) {
        return open_cache(root)->gc(max_bytes).to_json();
      },
      py::arg("root") = py::none(), py::arg("max_bytes") = py::none());
  module.def(
      "cache_clear",
      [](const std::optional<std::string>& root) { return open_cache(root)->clear().to_json(); },
      py::arg("root") = py::none());

  module.def("driver_available", [] { return cuda::driver_available(); });
  module.def("driver_unavailable_reason", [] { return cuda::driver_unavailable_reason(); });
  module.def("device_count", [] { return cuda::device_count(); });
  // The target a warmup compiles for on a device (what the registry picks): "sm_90a".
  module.def("device_arch", [](int ordinal) {
    const cuda::DeviceInfo info = cuda::device_info(ordinal);
    return cuda::target_arch_for(info.compute_major, info.compute_minor);
  });
  module.def("nvrtc_available", [] { return nvrtc_available(); });
  module.def("nvrtc_unavailable_reason", [] { return nvrtc_unavailable_reason(); });
}

}  // namespace zerojit::python

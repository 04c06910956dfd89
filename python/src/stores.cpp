// zerojit.RedisStore: the rank groups' store in Redis (include/zerojit/redis_store.hpp), with
// the methods zerojit.RankGroup and torch.distributed's stores have. Every call runs without
// the GIL, so a rank's watch thread polling the store never holds up its main thread.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "zerojit/redis_store.hpp"

namespace zerojit::python {

namespace py = pybind11;

namespace {

std::chrono::milliseconds milliseconds_of(double seconds, const char* name) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 86400.0 * 365) {
    throw py::value_error(std::string("zerojit.RedisStore: ") + name + "=" +
                          std::to_string(seconds) + " is not a number of seconds in [0, 1 year]");
  }
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000)));
}

// The remote tier's settings from the environment (ZEROJIT_REMOTE_CACHE and the rest), with
// the arguments given in their place.
std::unique_ptr<RedisStore> make_store(std::optional<std::string> url,
                                       std::optional<std::string> prefix, double timeout) {
  RemoteCacheOptions options = default_remote_cache_options();
  if (url) {
    options.url = *url;
    options.url_source = "zerojit.RedisStore(url=...)";
  }
  if (options.url.empty()) {
    throw py::value_error(
        "zerojit.RedisStore: no server: pass url='redis://host:port/db' or set "
        "ZEROJIT_REMOTE_CACHE");
  }
  if (prefix) options.prefix = *prefix;
  return std::make_unique<RedisStore>(std::move(options), milliseconds_of(timeout, "timeout"));
}

}  // namespace

void bind_stores(py::module_& module) {
  using Release = py::call_guard<py::gil_scoped_release>;
  py::class_<RedisStore>(module, "RedisStore",
                         "A key-value store in Redis for zerojit.RankGroup (docs/PYTHON.md, "
                         "\"Ranks that agree\")")
      .def(py::init(&make_store), py::arg("url") = py::none(), py::arg("prefix") = py::none(),
           py::arg("timeout") = 300.0)
      .def("__repr__", [](const RedisStore& store) { return "zerojit." + store.describe(); })
      .def("set", &RedisStore::set, py::arg("key"), py::arg("value"), Release())
      .def(
          "get",
          [](RedisStore& store, const std::string& key) {
            std::string value;
            {
              py::gil_scoped_release released;
              value = store.get(key);
            }
            return py::bytes(value);
          },
          py::arg("key"), "The value once the key is set (waits up to the store's timeout).")
      .def("add", &RedisStore::add, py::arg("key"), py::arg("amount"), Release())
      .def("check", &RedisStore::check, py::arg("keys"), Release())
      .def(
          "wait",
          [](RedisStore& store, const std::vector<std::string>& keys,
             std::optional<double> timeout) {
            std::optional<std::chrono::milliseconds> bound;
            if (timeout) bound = milliseconds_of(*timeout, "timeout");
            py::gil_scoped_release released;
            store.wait(keys, bound);
          },
          py::arg("keys"), py::arg("timeout") = py::none())
      .def("delete_key", &RedisStore::remove, py::arg("key"), Release());
}

}  // namespace zerojit::python

// The C++ side of zerojit.RankGroup: zerojit.RedisStore, the rank groups' store in Redis
// (include/zerojit/redis_store.hpp), with the methods RankGroup and torch.distributed's stores
// have, every call without the GIL (a rank's watch thread polling the store never holds up its
// main thread); and the comparison of the ranks' records (include/zerojit/ranks.hpp), so that
// Python's groups and C++'s apply one set of rules with one set of messages.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include "zerojit/ranks.hpp"
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

py::object optional_text(const std::optional<std::string>& text) {
  return text ? py::object(py::str(*text)) : py::object(py::none());
}

py::dict difference_dict(const RankDifference& difference) {
  py::list keys;
  for (const RankKeyDifference& key : difference.keys) {
    py::dict entry;
    entry["kernel"] = key.kernel;
    entry["key"] = key.key;
    entry["arch"] = key.arch;
    entry["rank_identity"] = optional_text(key.rank_identity);
    entry["reference_identity"] = optional_text(key.reference_identity);
    keys.append(entry);
  }
  py::dict out;
  out["ranks"] = difference.ranks;
  out["reference"] =
      difference.reference ? py::object(py::int_(*difference.reference)) : py::object(py::none());
  out["cause"] = difference.cause;
  out["keys"] = keys;
  return out;
}

// agreement.disagreement's work: `records_json` is {rank: record} of the ranks that published.
py::object compare(const std::string& records_json, int world_size, std::vector<int> missing,
                   double timeout_s, const std::string& prefix) {
  const nlohmann::json parsed = nlohmann::json::parse(records_json);  // outlives the loop
  std::map<int, RankRecord> records;
  for (const auto& [rank, record] : parsed.items()) {
    records.emplace(std::stoi(rank), RankRecord::from_json(record.dump()));
  }
  const std::optional<RankDisagreement> found =
      compare_ranks(records, world_size, std::move(missing), timeout_s, prefix);
  if (!found) return py::none();
  py::list differences;
  for (const RankDifference& difference : found->differences) {
    differences.append(difference_dict(difference));
  }
  return py::make_tuple(found->message, found->ranks, found->missing, differences);
}

// The digest RankRecord::seal gives a record (its "digest" field ignored).
std::string record_digest(const std::string& record_json) {
  RankRecord record = RankRecord::from_json(record_json);
  record.seal();
  return record.digest;
}

}  // namespace

void bind_ranks(py::module_& module) {
  module.def("rank_record_digest", &record_digest, py::arg("record_json"));
  module.def("compare_ranks", &compare, py::arg("records_json"), py::arg("world_size"),
             py::arg("missing"), py::arg("timeout"), py::arg("prefix"));
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

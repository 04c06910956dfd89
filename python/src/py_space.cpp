// zerojit._core.Space: the C++ warmup space (space.hpp) over Python values, so that a Python
// kernel's space is expanded by the very code that expands a C++ kernel's: the same odometer
// order, range and advance rules, bound, filters and dead-axis report. A point reaches Python
// as a dict {axis name: value}; the dispatch given to expand() maps it to a hashable key.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "py_kernel.hpp"

namespace py = pybind11;

namespace zerojit::python {
namespace {

// A Python value with the text (its str()) a point's description shows for it (space.hpp prints a
// value through detail::append_value, which takes anything convertible to a string_view).
struct Labeled {
  py::object object;
  std::string text;
  operator std::string_view() const { return text; }  // NOLINT(google-explicit-constructor)
};

Labeled labeled(py::handle value) {
  return {py::reinterpret_borrow<py::object>(value), py::str(value).cast<std::string>()};
}

// One axis value per axis, in axis order (a zip axis holds its row).
struct Point {
  std::vector<py::object> values;
};

template <class Value>
auto setter(std::size_t axis) {
  return [axis](Point& point, const Value& value) {
    if (point.values.size() <= axis) point.values.resize(axis + 1);
    if constexpr (std::is_same_v<Value, Labeled>) {
      point.values[axis] = value.object;
    } else {
      point.values[axis] = py::int_(value);
    }
  };
}

class Space {
 public:
  Space& choices(const std::string& name, const py::iterable& values) {
    std::vector<Labeled> list;
    for (py::handle value : values) {
      if (list.size() >= space_.max_points()) {  // read no further: it may never end
        throw Error("warmup axis '" + name + "' has more than " +
                    std::to_string(space_.max_points()) +
                    " values, the space's bound; narrow the axis or raise the bound before "
                    "adding it");
      }
      list.push_back(labeled(value));
    }
    check_new({name});
    space_.choices(name, std::move(list), setter<Labeled>(axes_.size()));
    axes_.push_back({name});
    return *this;
  }

  Space& range(const std::string& name, std::int64_t first, std::int64_t last, std::int64_t step) {
    check_new({name});
    space_.range(name, first, last, step, setter<std::int64_t>(axes_.size()));
    axes_.push_back({name});
    return *this;
  }

  Space& advance(const std::string& name, std::int64_t first, std::int64_t last,
                 const py::function& next) {
    check_new({name});
    space_.advance(
        name, first, last, [&next](std::int64_t value) { return next(value).cast<std::int64_t>(); },
        setter<std::int64_t>(axes_.size()));
    axes_.push_back({name});
    return *this;
  }

  Space& zip(const std::vector<std::string>& names, const py::iterable& rows) {
    if (names.size() < 2) throw Error("warmup zip axis: name at least two fields");
    check_new(names);
    std::vector<Labeled> list;
    for (py::handle row : rows) {
      if (!py::isinstance<py::sequence>(row) || py::len(row) != names.size()) {
        throw Error("warmup zip axis over " + join(names) + ": row " + std::to_string(list.size()) +
                    " (" + labeled(row).text + ") must hold " + std::to_string(names.size()) +
                    " values, one per field");
      }
      list.push_back(labeled(row));
    }
    const std::size_t axis = axes_.size();
    space_.zip(
        names, std::move(list), setter<Labeled>(axis),
        std::function<std::string(const Labeled&)>([](const Labeled& row) { return row.text; }));
    axes_.push_back(names);
    return *this;
  }

  Space& filter(const std::string& name, const py::function& keep) {
    space_.filter(name, [this, keep](const Point& point) {
      return py::bool_(keep(to_dict(point))).cast<bool>();
    });
    return *this;
  }

  Space& bound(std::size_t max_points) {
    if (max_points == 0) throw Error("warmup space bound must be positive");
    space_.max_points(max_points);
    return *this;
  }

  // (points as dicts) for listing and tests: every kept point in odometer order.
  py::list points() const {
    py::list out;
    space_.for_each_point([&](std::size_t, const std::vector<std::size_t>&, const Point* point) {
      if (point != nullptr) out.append(to_dict(*point));
    });
    return out;
  }

  // dispatch(point dict) -> hashable key. Returns (keys in first-seen order, dead axes,
  // points, filtered_out).
  py::tuple expand(const py::function& dispatch) const {
    py::dict index_of;  // key -> its index in `keys`
    py::list keys;
    const auto expansion = space_.expand([&](const Point& point) {
      py::object key = dispatch(to_dict(point));
      if (!index_of.contains(key)) {
        index_of[key] = py::int_(py::len(keys));
        keys.append(key);
      }
      return KeySlot{index_of[key].cast<std::int64_t>()};
    });
    return py::make_tuple(keys, expansion.dead_axes, expansion.points, expansion.filtered_out);
  }

  std::size_t axis_count() const { return axes_.size(); }

 private:
  void check_new(const std::vector<std::string>& names) const {
    for (const auto& name : names) {
      for (const auto& axis : axes_) {
        for (const auto& existing : axis) {
          if (existing == name) throw Error("warmup space: axis '" + name + "' is defined twice");
        }
      }
    }
  }

  static std::string join(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& name : names) out += (out.empty() ? "" : "+") + name;
    return out;
  }

  py::dict to_dict(const Point& point) const {
    py::dict out;
    for (std::size_t a = 0; a < axes_.size() && a < point.values.size(); ++a) {
      const auto& names = axes_[a];
      if (names.size() == 1) {
        out[py::str(names[0])] = point.values[a];
      } else {
        const py::sequence row = py::reinterpret_borrow<py::sequence>(point.values[a]);
        for (std::size_t f = 0; f < names.size(); ++f) out[py::str(names[f])] = row[f];
      }
    }
    return out;
  }

  WarmupSpace<Point> space_;
  std::vector<std::vector<std::string>> axes_;  // the names each axis sets
};

}  // namespace

void bind_space(py::module_& module) {
  py::class_<Space>(module, "Space", "the C++ warmup space over Python values (zerojit.Space)")
      .def(py::init<>())
      .def("choices", &Space::choices, py::arg("name"), py::arg("values"),
           py::return_value_policy::reference_internal)
      .def("range", &Space::range, py::arg("name"), py::arg("first"), py::arg("last"),
           py::arg("step"), py::return_value_policy::reference_internal)
      .def("advance", &Space::advance, py::arg("name"), py::arg("first"), py::arg("last"),
           py::arg("next"), py::return_value_policy::reference_internal)
      .def("zip", &Space::zip, py::arg("names"), py::arg("rows"),
           py::return_value_policy::reference_internal)
      .def("filter", &Space::filter, py::arg("name"), py::arg("keep"),
           py::return_value_policy::reference_internal)
      .def("bound", &Space::bound, py::arg("max_points"),
           py::return_value_policy::reference_internal)
      .def("points", &Space::points)
      .def("expand", &Space::expand, py::arg("dispatch"))
      .def_property_readonly("axis_count", &Space::axis_count);
  module.def("next_power_of_two", &next_power_of_two, py::arg("value"));
}

}  // namespace zerojit::python

// Warmup spaces: the runtime descriptors a kernel can see under a config, as a product of
// axes. Warmup evaluates the kernel's own dispatch at every point, so the keys it compiles are
// by construction the keys the runtime will ask for, as long as the space covers the runtime.
//
//   WarmupSpace<Desc> space(base);
//   space.choices("cos_sin_dtype", {DType::f32}, [](Desc& d, DType v) { d.cos_sin.dtype = v; })
//        .advance("num_tokens", 1, 8192, next_power_of_two, set_tokens)
//        .zip({"block_size", "gather"}, rows, set_pair)
//        .filter("token_fits", [](const Desc& d) { ... });
//   SpaceExpansion<Key> expansion = space.expand([&](const Desc& d) { return kernel.dispatch(d);
//   });
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "zerojit/error.hpp"
#include "zerojit/key.hpp"

namespace zerojit {

// Smallest power of two strictly greater than `value` (1 for value < 1). From 2^62 on no such
// power fits in an int64: the result saturates at INT64_MAX, so an advance by it still stops.
std::int64_t next_power_of_two(std::int64_t value);

inline constexpr std::size_t kDefaultMaxSpacePoints = std::size_t{1} << 20;

template <CompileKey Key>
struct SpaceExpansion {
  std::vector<Key> keys;               // deduplicated, in first-seen order
  std::vector<std::string> dead_axes;  // axes (of >= 2 values) that never change the key
  std::size_t points = 0;              // points in the product
  std::size_t filtered_out = 0;        // points a filter dropped
};

template <class Desc>
class WarmupSpace {
 public:
  explicit WarmupSpace(Desc base = Desc{}) : base_(std::move(base)) {}

  // An axis over explicit values.
  template <class Value, class Setter>
  WarmupSpace& choices(std::string name, std::vector<Value> values, Setter set) {
    auto axis = std::make_shared<Axis>();
    axis->name = std::move(name);
    axis->size = values.size();
    axis->apply = [values, set](Desc& desc, std::size_t i) { set(desc, values[i]); };
    axis->label = [values](std::size_t i) {
      std::string text;
      detail::append_value(text, values[i]);
      return text;
    };
    axes_.push_back(std::move(axis));
    return *this;
  }

  // Integers first, first + step, ... up to and including last. An axis of more values than
  // the space's bound (max_points when the axis is added) is refused before any is listed.
  template <class Setter>
  WarmupSpace& range(std::string name, std::int64_t first, std::int64_t last, std::int64_t step,
                     Setter set) {
    if (step <= 0) throw Error("warmup axis '" + name + "': the step must be positive");
    std::vector<std::int64_t> values;
    if (first <= last) {
      // Counted in unsigned arithmetic: last - first overflows an int64 for a wide range.
      const std::uint64_t span =
          static_cast<std::uint64_t>(last) - static_cast<std::uint64_t>(first);
      const std::uint64_t steps = span / static_cast<std::uint64_t>(step);
      if (steps >= max_points_) refuse_axis(name, first, last);  // steps + 1 values
      const std::uint64_t count = steps + 1;
      values.reserve(static_cast<std::size_t>(count));
      for (std::uint64_t i = 0; i < count; ++i) {
        values.push_back(static_cast<std::int64_t>(static_cast<std::uint64_t>(first) +
                                                   i * static_cast<std::uint64_t>(step)));
      }
    }
    return choices(std::move(name), std::move(values), set);
  }

  // Integers first, next(first), next(next(first)), ... while <= last; `last` itself is always
  // a point too, so the largest runtime value is covered even when the advance skips it. The
  // advance must be strictly increasing (e.g. next_power_of_two). `next` is never called at or
  // past `last`, so an advance that would overflow there is not reached; an axis of more
  // values than the space's bound (max_points when the axis is added) is refused.
  template <class Setter>
  WarmupSpace& advance(std::string name, std::int64_t first, std::int64_t last,
                       const std::function<std::int64_t(std::int64_t)>& next, Setter set) {
    std::vector<std::int64_t> values;
    for (std::int64_t v = first; v < last;) {
      values.push_back(v);
      // `last` still follows.
      if (values.size() >= max_points_) refuse_axis(name, first, last);
      const std::int64_t following = next(v);
      if (following <= v) {
        throw Error("warmup axis '" + name + "': the advance from " + std::to_string(v) + " gave " +
                    std::to_string(following) + ", which does not increase");
      }
      v = following;
    }
    values.push_back(last);
    return choices(std::move(name), std::move(values), set);
  }

  // Rows whose fields vary together: one axis named "a+b+...".
  template <class Row, class Setter>
  WarmupSpace& zip(const std::vector<std::string>& names, std::vector<Row> rows, Setter set,
                   std::function<std::string(const Row&)> label = nullptr) {
    std::string joined;
    for (const auto& n : names) joined += (joined.empty() ? "" : "+") + n;
    auto axis = std::make_shared<Axis>();
    axis->name = std::move(joined);
    axis->size = rows.size();
    axis->apply = [rows, set](Desc& desc, std::size_t i) { set(desc, rows[i]); };
    axis->label = [rows, label](std::size_t i) {
      return label ? label(rows[i]) : "row " + std::to_string(i);
    };
    axes_.push_back(std::move(axis));
    return *this;
  }

  // Drops points for which `keep` is false (after every axis was applied).
  WarmupSpace& filter(std::string name, std::function<bool(const Desc&)> keep) {
    filters_.push_back({std::move(name), std::move(keep)});
    return *this;
  }

  // The largest product expand() accepts (default kDefaultMaxSpacePoints).
  WarmupSpace& max_points(std::size_t bound) {
    max_points_ = bound;
    return *this;
  }
  std::size_t max_points() const { return max_points_; }

  std::size_t axis_count() const { return axes_.size(); }

  // Every point's descriptors, in odometer order (last axis fastest), filters applied.
  template <class Visitor>
  void for_each_point(Visitor&& visit) const {
    const std::size_t total = checked_product();
    std::vector<std::size_t> index(axes_.size(), 0);
    for (std::size_t point = 0; point < total; ++point) {
      Desc desc = base_;
      for (std::size_t a = 0; a < axes_.size(); ++a) axes_[a]->apply(desc, index[a]);
      bool kept = true;
      for (const auto& filter : filters_) kept = kept && filter.keep(desc);
      visit(point, index, kept ? &desc : nullptr);
      for (std::size_t a = axes_.size(); a-- > 0;) {
        if (++index[a] < axes_[a]->size) break;
        index[a] = 0;
      }
    }
  }

  // Evaluates `dispatch` at every kept point; dedups keys in first-seen order and finds the
  // dead axes. A point dispatch rejects is an error of the space, reported with the point.
  template <class Dispatch>
  auto expand(Dispatch&& dispatch) const
      -> SpaceExpansion<std::decay_t<std::invoke_result_t<Dispatch&, const Desc&>>> {
    using Key = std::decay_t<std::invoke_result_t<Dispatch&, const Desc&>>;
    SpaceExpansion<Key> out;
    out.points = checked_product();
    std::vector<std::ptrdiff_t> key_of_point(out.points, -1);
    std::unordered_map<Key, std::size_t, KeyHasher> seen;
    for_each_point([&](std::size_t point, const std::vector<std::size_t>& index, const Desc* desc) {
      if (desc == nullptr) {
        ++out.filtered_out;
        return;
      }
      Key key;
      try {
        key = dispatch(*desc);
      } catch (const std::exception& error) {
        throw Error("warmup space point {" + describe_point(index) +
                    "} was rejected by dispatch: " + error.what());
      }
      auto [it, inserted] = seen.emplace(key, out.keys.size());
      if (inserted) out.keys.push_back(key);
      key_of_point[point] = static_cast<std::ptrdiff_t>(it->second);
    });
    out.dead_axes = find_dead_axes(key_of_point);
    return out;
  }

 private:
  struct Axis {
    std::string name;
    std::size_t size = 0;
    std::function<void(Desc&, std::size_t)> apply;
    std::function<std::string(std::size_t)> label;
  };
  struct Filter {
    std::string name;
    std::function<bool(const Desc&)> keep;
  };

  [[noreturn]] void refuse_axis(const std::string& name, std::int64_t first,
                                std::int64_t last) const {
    throw Error("warmup axis '" + name + "' from " + std::to_string(first) + " to " +
                std::to_string(last) + " has more than " + std::to_string(max_points_) +
                " values, the space's bound; narrow the axis or raise max_points before adding it");
  }

  std::size_t checked_product() const {
    std::size_t total = 1;
    bool over = false;
    for (const auto& axis : axes_) {
      if (axis->size == 0) return 0;
      if (total > max_points_ / axis->size) over = true;
      total = over ? max_points_ + 1 : total * axis->size;
    }
    if (over || total > max_points_) {
      std::string axes;
      for (const auto& axis : axes_) {
        axes += (axes.empty() ? "" : " x ") + axis->name + "(" + std::to_string(axis->size) + ")";
      }
      throw Error("warmup space " + axes + " has more than " + std::to_string(max_points_) +
                  " points; narrow an axis or raise max_points");
    }
    return total;
  }

  std::string describe_point(const std::vector<std::size_t>& index) const {
    std::string text;
    for (std::size_t a = 0; a < axes_.size(); ++a) {
      text += (a ? ", " : "") + axes_[a]->name + "=" + axes_[a]->label(index[a]);
    }
    return text;
  }

  // An axis is dead when, for every setting of the other axes, all its kept points share one
  // key. Axes with fewer than two values cannot vary and are not reported.
  std::vector<std::string> find_dead_axes(const std::vector<std::ptrdiff_t>& key_of_point) const {
    std::vector<std::string> dead;
    std::vector<std::size_t> strides(axes_.size(), 1);
    for (std::size_t a = axes_.size(); a-- > 1;) strides[a - 1] = strides[a] * axes_[a]->size;
    for (std::size_t a = 0; a < axes_.size(); ++a) {
      if (axes_[a]->size < 2) continue;
      std::unordered_map<std::size_t, std::ptrdiff_t> first_key;  // other coordinates -> key
      bool live = false;
      for (std::size_t point = 0; point < key_of_point.size() && !live; ++point) {
        if (key_of_point[point] < 0) continue;
        const std::size_t coordinate = (point / strides[a]) % axes_[a]->size;
        const std::size_t others = point - coordinate * strides[a];
        auto [it, inserted] = first_key.emplace(others, key_of_point[point]);
        live = !inserted && it->second != key_of_point[point];
      }
      if (!live) dead.push_back(axes_[a]->name);
    }
    return dead;
  }

  Desc base_;
  std::vector<std::shared_ptr<Axis>> axes_;
  std::vector<Filter> filters_;
  std::size_t max_points_ = kDefaultMaxSpacePoints;
};

}  // namespace zerojit

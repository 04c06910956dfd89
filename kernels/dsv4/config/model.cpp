#include "dsv4/config/model.hpp"

#include <algorithm>

namespace zerojit::dsv4 {

bool has_compress_ratio(const ModelConfig& model, int compress_ratio) {
  const auto contains = [compress_ratio](const std::vector<int>& ratios) {
    return std::find(ratios.begin(), ratios.end(), compress_ratio) != ratios.end();
  };
  return contains(model.compress_ratios) || contains(model.mtp_compress_ratios);
}

}  // namespace zerojit::dsv4

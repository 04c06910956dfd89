#include "dsv4/config/model.hpp"

#include <algorithm>

#include "dsv4/config/detail.hpp"

namespace zerojit::dsv4 {

bool has_compress_ratio(const ModelConfig& model, int compress_ratio) {
  const auto contains = [compress_ratio](const std::vector<int>& ratios) {
    return std::find(ratios.begin(), ratios.end(), compress_ratio) != ratios.end();
  };
  return contains(model.compress_ratios) || contains(model.mtp_compress_ratios);
}

void refuse_model_field(const ModelConfig& model, const std::string& message) {
  config_detail::fail_model(model.name, message);
}

}  // namespace zerojit::dsv4

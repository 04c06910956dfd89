#include "dsv4/family.hpp"

namespace zerojit::dsv4 {

void validate_for_kernels(const Dsv4Config& config) {
  validate(config);
  (void)kFamily.decide(config);
}

AttentionKernels::AttentionKernels(Dsv4Config config) : config_(std::move(config)) {
  validate(config_);
  decisions_ = kFamily.decide(config_);
}

}  // namespace zerojit::dsv4

// A whole DSv4 configuration: the model and the serving options together.
#pragma once

#include "dsv4/config/model.hpp"
#include "dsv4/config/serving.hpp"

namespace zerojit::dsv4 {

struct Dsv4Config {
  ModelConfig model;
  ServingConfig serving;

  bool operator==(const Dsv4Config&) const = default;
};

// Validates the model and the serving options and their consistency. Throws ConfigError naming
// the field (and the model's name: its file) and the values allowed. Whether the kernels they run
// can be built for them (qk_rope_head_dim a multiple of 16 when the indexer runs, 64 when a
// compressor runs, ...) is each kernel gate's to say: validate_for_kernels (dsv4/family.hpp).
void validate(const Dsv4Config& config);

}  // namespace zerojit::dsv4

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

// Validates the model and the serving options, then checks that every kernel they run (by the
// kernels' gates) can be built for them: e.g. qk_rope_head_dim a multiple of 16 when the indexer
// runs, 64 when a compressor runs, index_topk 512, 1024 or 2048 under DCP. Throws ConfigError
// naming the field (and the model's name: its file) and the values allowed.
void validate(const Dsv4Config& config);

}  // namespace zerojit::dsv4

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

void validate(const Dsv4Config& config);

}  // namespace zerojit::dsv4

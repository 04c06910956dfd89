#include "examples/examples.hpp"

namespace zerojit::examples {
namespace {

std::optional<ScaleAddGate> scale_add_gate(const ExamplesConfig&) { return ScaleAddGate{}; }
std::optional<EmptyGate> empty_gate(const ExamplesConfig&) { return EmptyGate{32}; }

// The family: one row per kernel.
constexpr KernelTable kTable{
    "examples",
    KernelRow<ScaleAddKernel, ScaleAddGate, ExamplesConfig>{&scale_add_gate},
    KernelRow<EmptyKernel, EmptyGate, ExamplesConfig>{&empty_gate},
};

}  // namespace

void register_examples(WarmupRegistry& registry, const ExamplesConfig& config) {
  kTable.register_warmup(registry, kTable.decide(config));
}

std::vector<KernelBase*> all_kernels() { return kTable.kernels(); }

}  // namespace zerojit::examples

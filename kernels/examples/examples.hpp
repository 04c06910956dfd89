// The example kernel family: the smallest complete owners (scale_add, empty), which the core's
// tests and benchmarks run on, and the family table that registers them. docs/ADDING_A_KERNEL.md
// adds a kernel to this family step by step.
#pragma once

#include "examples/empty/empty.hpp"
#include "examples/scale_add/scale_add.hpp"
#include "zerojit/family.hpp"

namespace zerojit::examples {

// The example family takes no configuration: every kernel runs.
struct ExamplesConfig {};

// Registers every example kernel with its warmup space: the set `zerojit warmup --examples`
// compiles.
void register_examples(WarmupRegistry& registry, const ExamplesConfig& config = {});

// Every example kernel, in table order.
std::vector<KernelBase*> all_kernels();

}  // namespace zerojit::examples

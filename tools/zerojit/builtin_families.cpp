#include "builtin_families.hpp"

#include <utility>

#include "config_options.hpp"
#include "examples/examples.hpp"

namespace zerojit::tool {
namespace {

// The example kernels: no configuration, every kernel runs.
Family examples_family() {
  Family family;
  family.name = "examples";
  family.summary = "the built-in example kernels";
  family.configure = [](const OptionValues&, const std::optional<std::string>& arch) {
    FamilyConfiguration out;
    out.description = "the built-in example kernels";
    out.arch = arch.value_or("sm_90a");
    out.register_warmup = [](zerojit::WarmupRegistry& registry) {
      zerojit::examples::register_examples(registry);
    };
    return out;
  };
  return family;
}

}  // namespace

std::vector<Family> builtin_families() { return {dsv4_tool_family(), examples_family()}; }

ToolOptions builtin_tool_options(std::string program) {
  ToolOptions options;
  options.program = std::move(program);
  options.epilog = "docs/TOOL.md has examples.";
  // `--examples` predates --family; scripts and tests use it.
  options.family_flags = {{"--examples", "examples",
                           "The built-in example kernels (--family "
                           "examples)"}};
  return options;
}

}  // namespace zerojit::tool

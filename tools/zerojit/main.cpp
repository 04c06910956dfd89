// The zerojit command-line tool: warm a DSv4 configuration's kernels (`warmup`), print its
// manifest (`keys`), prove that serving compiles nothing (`run`), manage the compile cache
// (`cache`). docs/TOOL.md describes the commands. The commands are the tool library's
// (zerojit/tool.hpp, tool.cpp); this binary passes it zerojit's own families, as a project
// passes its own.
#include "config_options.hpp"
#include "examples/examples.hpp"
#include "zerojit/tool.hpp"

namespace {

using namespace zerojit::tool;

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

int main(int argc, char** argv) {
  const Family families[] = {dsv4_tool_family(), examples_family()};
  ToolOptions options;
  options.epilog = "docs/TOOL.md has examples.";
  // `--examples` predates --family; scripts and tests use it.
  options.family_flags = {{"--examples", "examples",
                           "The built-in example kernels (--family "
                           "examples)"}};
  return run_cli(argc, argv, families, options);
}

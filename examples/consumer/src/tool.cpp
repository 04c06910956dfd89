// The consumer's own command-line tool: every zerojit command (warmup, keys, cache ...) for its
// family, through zerojit::cli. Its options (--dtype, --length) are the family's.
#include <string>

#include "axpy.hpp"
#include "zerojit/tool.hpp"

namespace {

using namespace zerojit::tool;

Family axpy_family() {
  Family family;
  family.name = "axpy";
  family.summary = "the consumer's axpy kernel";
  family.options = {
      {.flag = "--dtype",
       .value_name = "f32|f64|all",
       .help = "The dtypes serving passes [all]",
       .check = [](const std::string& value) -> std::string {
         return value == "f32" || value == "f64" || value == "all" ? "" : "is not f32, f64 or all";
       }},
      {.flag = "--length", .help = "The length of x [1024]", .minimum = 1, .maximum = 1 << 30},
  };
  family.configure = [](const OptionValues& values, const std::optional<std::string>& arch) {
    consumer::AxpyConfig config;
    std::string dtype = "all";
    for (const auto& [flag, value] : values) {
      if (flag == "--dtype") dtype = value;
      if (flag == "--length") config.lengths = {std::stoll(value)};  // checked when parsed
    }
    if (dtype != "all") {
      config.dtypes = {dtype == "f32" ? zerojit::DType::f32 : zerojit::DType::f64};
    }
    FamilyConfiguration out;
    out.description = "axpy, dtype " + dtype + ", length " + std::to_string(config.lengths[0]);
    out.arch = arch.value_or("sm_90a");
    out.json = "{\"dtype\":\"" + dtype + "\",\"length\":" + std::to_string(config.lengths[0]) + "}";
    out.register_warmup = [config](zerojit::WarmupRegistry& registry) {
      consumer::register_warmup(registry, config);
    };
    return out;
  };
  return family;
}

}  // namespace

int main(int argc, char** argv) {
  const Family families[] = {axpy_family()};
  return run_cli(argc, argv, families, {.program = "axpy-tool"});
}

// The consumer's own command-line tool: every zerojit command (warmup, keys, run, cache ...) for
// its family, through zerojit::cli. Its options (--dtype, --length, and --battery-length for
// `run` only) are the family's; `run` is run_battery with the family's battery of calls.
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "axpy.hpp"
#include "zerojit/testing.hpp"
#include "zerojit/tool.hpp"

namespace {

using namespace zerojit::tool;

// The configuration the options name (they are checked when the command line is parsed).
consumer::AxpyConfig axpy_config(const OptionValues& values, std::string& dtype) {
  consumer::AxpyConfig config;
  dtype = "all";
  for (const auto& [flag, value] : values) {
    if (flag == "--dtype") dtype = value;
    if (flag == "--length") config.lengths = {std::stoll(value)};
  }
  if (dtype != "all") config.dtypes = {*zerojit::parse_dtype(dtype)};
  return config;
}

FamilyConfiguration configure(const OptionValues& values, const std::optional<std::string>& arch) {
  std::string dtype;
  const consumer::AxpyConfig config = axpy_config(values, dtype);
  FamilyConfiguration out;
  out.description = "axpy, dtype " + dtype + ", length " + std::to_string(config.lengths[0]);
  out.arch = arch.value_or("sm_90a");
  out.json = "{\"dtype\":\"" + dtype + "\",\"length\":" + std::to_string(config.lengths[0]) + "}";
  out.register_warmup = [config](zerojit::WarmupRegistry& registry) {
    consumer::register_warmup(registry, config);
  };
  return out;
}

// The battery's device memory: x and y, allocated once per device.
struct BatteryBuffers {
  int device = -1;
  std::optional<zerojit::testing::DeviceBuffer> x, y;

  zerojit::TensorRef tensor(bool is_x, zerojit::DType type, std::int64_t length, int on) {
    if (device != on) {
      const auto bytes = static_cast<std::size_t>(length) * 8;  // the widest dtype
      x.emplace(bytes, on);
      y.emplace(bytes, on);
      device = on;
    }
    return (is_x ? x : y)->tensor(type, {length});
  }
};

// `run`: each step calls the kernel as serving would, with a dtype of the configuration and the
// length of --battery-length (default: the configuration's); on a GPU the call launches.
int run(const RunRequest& request) {
  std::string dtype;
  const consumer::AxpyConfig config = axpy_config(request.values, dtype);
  std::int64_t length = config.lengths[0];
  for (const auto& [flag, value] : request.values) {
    if (flag == "--battery-length") length = std::stoll(value);
  }
  auto buffers = std::make_shared<BatteryBuffers>();
  const auto battery = [config, length, buffers](RunStep& step) {
    std::mt19937_64 random(step.seed());
    const zerojit::DType type = config.dtypes[random() % config.dtypes.size()];
    const auto x = zerojit::TensorDesc::contiguous(type, {length});
    auto& kernel = consumer::AxpyKernel::instance();
    step.call(kernel, consumer::AxpyDescriptors{x, x, 0.5}, [&](zerojit::cuda::Stream stream) {
      kernel(consumer::AxpyArgs{buffers->tensor(true, type, length, step.device()),
                                buffers->tensor(false, type, length, step.device()), 0.5},
             stream);
    });
  };
  return run_battery(request, configure(request.values, request.arch), battery);
}

Family axpy_family() {
  Family family;
  family.name = "axpy";
  family.summary = "the consumer's axpy kernel";
  family.options = {
      {.flag = "--dtype",
       .value_name = "f32|f64|bf16|all",
       .help = "The dtypes serving passes [all]",
       .check = [](const std::string& value) -> std::string {
         return value == "f32" || value == "f64" || value == "bf16" || value == "all"
                    ? ""
                    : "is not f32, f64, bf16 or all";
       }},
      {.flag = "--length", .help = "The length of x [1024]", .minimum = 1, .maximum = 1 << 30},
      {.flag = "--battery-length",
       .value_name = "N",
       .help = "The length of x in the battery's calls [--length]",
       .group = "Battery",
       .run_only = true,
       .minimum = 1,
       .maximum = 1 << 30},
  };
  family.configure = configure;
  family.run = run;
  family.run_help =
      "Warm up, arm the monitor, and call axpy as serving would (on each GPU; without one, "
      "through dispatch alone), each call's key checked against the warmup manifest";
  return family;
}

}  // namespace

int main(int argc, char** argv) {
  const Family families[] = {axpy_family()};
  return run_cli(argc, argv, families, {.program = "axpy-tool"});
}

// A battery call planned (dispatch only) or run, both through the family's one router.
#include "dsv4/battery/battery.hpp"

namespace zerojit::dsv4 {

std::vector<PlannedLaunch> plan_call(const AttentionKernels& kernels, const AttentionCall& call) {
  std::vector<PlannedLaunch> out;
  std::visit(
      [&](const auto& args) {
        kernels.route(args, [&out](auto& kernel, const auto& kernel_args) {
          const auto spec = kernel.launch_spec(kernel_args);
          // An empty grid launches nothing, so it compiles nothing either (JitKernel::launch).
          if (spec.geometry.empty()) return;
          out.push_back({&kernel, describe(spec.key), DescriptorText::of_args(kernel_args)()});
        });
      },
      call.args);
  return out;
}

void run_call(const AttentionKernels& kernels, const AttentionCall& call, cuda::Stream stream) {
  std::visit([&](const auto& args) { kernels.run(args, stream); }, call.args);
}

}  // namespace zerojit::dsv4

// A kernel that does nothing: the launch-overhead benchmark times the path around it.
#include "examples/empty/empty_params.h"

namespace zj::examples {

__global__ void empty_kernel(const __grid_constant__ EmptyParams) {}

}  // namespace zj::examples

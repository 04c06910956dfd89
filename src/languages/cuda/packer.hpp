// The CUDA C++ language's argument packer (a zerojit.Kernel's call): each argument packed by
// its declared parameter kind (zerojit.Kernel.params), the launch geometry the call path found.
#pragma once

#include <memory>
#include <string_view>

#include "languages/packer.hpp"

namespace zerojit::languages {

std::unique_ptr<ArgumentPacker> make_cuda_packer(std::string_view kernel);

}  // namespace zerojit::languages

// Triton's argument packer (a zerojit.TritonKernel's call): every argument checked against the
// specialization the slot's program compiled (pointer dtype and alignment, integer width and
// divisibility, constants) and packed as Triton's own launcher packs it (launch_record.hpp).
#pragma once

#include <memory>
#include <string_view>

#include "languages/packer.hpp"

namespace zerojit::languages {

std::unique_ptr<ArgumentPacker> make_triton_packer(std::string_view kernel);

}  // namespace zerojit::languages

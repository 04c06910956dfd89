// CuTeDSL's argument packer (a zerojit.CuteKernel's call): every tensor checked against what the
// compiled code assumes and cannot check itself (dtype, static extents, divisibility and width
// of the dynamic ones, strides, alignment), and the exported host entry's arguments filled from
// the descriptors (its C ABI: a struct per tensor holding the data pointer, the dynamic extents
// and the dynamic strides; a value per scalar; the stream; the entry's return code last).
#pragma once

#include <memory>
#include <string_view>

#include "languages/packer.hpp"

namespace zerojit::languages {

std::unique_ptr<ArgumentPacker> make_cutedsl_packer(std::string_view kernel);

}  // namespace zerojit::languages

// Kernel sources embedded into the binary at build time (see cmake/ZerojitEmbed.cmake), so
// NVRTC compiles them from memory and no source tree is needed at run time.
#pragma once

#include <span>
#include <string_view>

namespace zerojit {

struct EmbeddedFile {
  std::string_view path;  // relative to the kernels/ root, as #include directives name it
  std::string_view content;
};

class EmbeddedFileSet {
 public:
  constexpr explicit EmbeddedFileSet(std::span<const EmbeddedFile> files) : files_(files) {}

  // nullptr when absent.
  const EmbeddedFile* find(std::string_view path) const {
    for (const EmbeddedFile& file : files_) {
      if (file.path == path) return &file;
    }
    return nullptr;
  }
  std::span<const EmbeddedFile> files() const { return files_; }

 private:
  std::span<const EmbeddedFile> files_;
};

}  // namespace zerojit

// Writes valid cache entries of assorted shapes (empty and large cubins, several kernel names,
// a log, empty strings, a Triton and a CuTeDSL entry with their launch records) into a
// directory: the fuzzer's seed corpus.
#include <cstdio>
#include <fstream>
#include <string>

#include "support/language_entries.hpp"
#include "zerojit/cache_entry.hpp"

namespace {

bool write_seed(const std::string& directory, const std::string& name,
                const zerojit::CompiledArtifact& artifact) {
  const std::string bytes = zerojit::encode_entry(artifact);
  std::ofstream out(directory + "/" + name + ".zjc", std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return out.good();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_cache_entry_seeds DIRECTORY\n");
    return 2;
  }
  const std::size_t cubin_sizes[] = {0, 1, 64, 700, 5000};
  int written = 0;
  for (std::size_t variant = 0; variant < std::size(cubin_sizes); ++variant) {
    zerojit::CompiledArtifact artifact;
    zerojit::IdentityComponents& c = artifact.components;
    c.format = 1 + variant;
    c.kernel = 0x1111 * (variant + 1);
    c.source = 0xabcdef12345678ull ^ variant;
    c.names = 7 * variant;
    c.options = 0;
    c.key = ~variant;
    c.arch = 0x9000 + variant;
    c.compiler = 0x1300;
    artifact.identity = zerojit::identity_from_components(c);
    artifact.kernel_name = variant == 0 ? "" : "seed.kernel" + std::to_string(variant);
    artifact.key_text = "block=" + std::to_string(32 << variant) + ", dtype=f32";
    artifact.arch = variant % 2 == 0 ? "sm_90a" : "sm_100a";
    artifact.compiler_version = "13.0";
    artifact.compile_seconds = 0.125 * static_cast<double>(variant);
    artifact.log = variant == 3 ? "warning: something worth a look" : "";
    for (std::size_t i = 0; i < variant; ++i) {
      artifact.lowered_names.push_back(
          {"zj::seed<" + std::to_string(i) + ">", "_ZN2zj4seedILi" + std::to_string(i) + "EEEvv"});
    }
    artifact.cubin.resize(cubin_sizes[variant]);
    for (std::size_t i = 0; i < artifact.cubin.size(); ++i) {
      artifact.cubin[i] = static_cast<char>((i * 2654435761u) >> 13);
    }
    written += write_seed(argv[1], "seed-" + std::to_string(variant), artifact) ? 1 : 0;
  }
  // Entries whose launch records their kinds decode and check against the compile request.
  for (const zerojit::Language language : {zerojit::Language::triton, zerojit::Language::cutedsl}) {
    written += write_seed(argv[1], "seed-" + std::string(zerojit::to_string(language)),
                          zerojit::test::synthetic_language_artifact(language))
                   ? 1
                   : 0;
  }
  std::printf("%d seed entries written\n", written);
  return written == static_cast<int>(std::size(cubin_sizes)) + 2 ? 0 : 1;
}

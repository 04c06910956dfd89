#include "version_command.hpp"

#include <link.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "json_output.hpp"
#include "option_values.hpp"
#include "zerojit/compiler.hpp"
#include "zerojit/cuda.hpp"

#ifndef ZEROJIT_VERSION
#error "the build defines ZEROJIT_VERSION (CMake's project version)"
#endif

namespace zerojit::tool {
namespace {

// The file of the loaded NVRTC: the search may have found it by name on the loader's path, so
// the process's own list of loaded objects is what says where it came from.
std::string loaded_nvrtc_file() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const std::size_t slash = name.rfind('/');
        const std::string base = slash == std::string::npos ? name : name.substr(slash + 1);
        if (base.starts_with("libnvrtc.so")) {
          *static_cast<std::string*>(out) = name;
          return 1;
        }
        return 0;
      },
      &found);
  return found;
}

std::string driver_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace

int run_version(bool json) {
  nlohmann::json nvrtc = {{"found", nvrtc_available()}};
  if (nvrtc_available()) {
    nvrtc["version"] = nvrtc_version();
    nvrtc["path"] = loaded_nvrtc_file();
  } else {
    nvrtc["reason"] = nvrtc_unavailable_reason();
  }
  nlohmann::json driver = {{"found", cuda::driver_available()}};
  if (cuda::driver_available()) {
    int version = 0;
    cuda::driver().cuDriverGetVersion(&version);
    driver["version"] = driver_version_text(version);
    driver["devices"] = cuda::device_count();
  } else {
    driver["reason"] = cuda::driver_unavailable_reason();
  }
  if (json) {
    print_json(success_document(
        "version", {{"version", ZEROJIT_VERSION}, {"nvrtc", nvrtc}, {"driver", driver}}));
    return 0;
  }
  // A project's tool says its own name and the zerojit it is built on.
  if (program_name() == "zerojit") {
    std::printf("zerojit %s\n", ZEROJIT_VERSION);
  } else {
    std::printf("%s (zerojit %s)\n", program_name().c_str(), ZEROJIT_VERSION);
  }
  if (nvrtc.at("found").get<bool>()) {
    std::printf("NVRTC %s: %s\n", nvrtc.at("version").get<std::string>().c_str(),
                nvrtc.at("path").get<std::string>().c_str());
  } else {
    std::printf("NVRTC: not found: %s\n", nvrtc.at("reason").get<std::string>().c_str());
  }
  if (driver.at("found").get<bool>()) {
    std::printf("CUDA driver %s: %d device(s)\n", driver.at("version").get<std::string>().c_str(),
                driver.at("devices").get<int>());
  } else {
    std::printf("CUDA driver: not found: %s\n", driver.at("reason").get<std::string>().c_str());
  }
  return 0;
}

}  // namespace zerojit::tool

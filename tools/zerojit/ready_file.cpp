#include "ready_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "exit_codes.hpp"

namespace zerojit::tool {

void remove_ready_file(const std::string& path) {
  std::error_code error;
  std::filesystem::remove(path, error);
  if (error) {
    throw ToolError{kExitFailure, "cannot remove the ready file " + path + ": " + error.message(),
                    "pass --ready-file a path this user can write and remove"};
  }
}

void write_file_atomically(const std::string& path, const std::string& text,
                           const std::string& what) {
  // In the same directory, so that the rename never crosses file systems; the process id keeps
  // two warmups writing one path from sharing a temporary file.
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  bool written = false;
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    written = bool(out);
  }
  const int saved = errno;
  std::error_code error;
  if (written) std::filesystem::rename(temporary, path, error);
  if (!written || error) {
    std::filesystem::remove(temporary);  // never leave a half-written file behind
    throw ToolError{kExitFailure,
                    "cannot write the " + what + " " + path + ": " +
                        (written ? error.message() : std::string(std::strerror(saved))),
                    "pass a path in a directory this user can write"};
  }
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

}  // namespace zerojit::tool

#include "zerojit/misses.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "environment.hpp"
#include "zerojit/error.hpp"
#include "zerojit/log.hpp"

namespace zerojit {
namespace {

using Json = nlohmann::ordered_json;

// Lines longer than this are refused by the reader (and never written): a damaged file must
// not make the reader hold it whole. A descriptors text stays far below.
constexpr std::size_t kMaxLineBytes = 64 * 1024;

struct MissLog {
  std::mutex mutex;
  std::optional<std::optional<std::string>> configured;    // set_misses_file, once called
  std::set<std::pair<std::string, std::string>> recorded;  // (kernel, key) of this process
  bool write_failure_reported = false;
};

MissLog& miss_log() {
  static auto* instance = new MissLog();  // recorded into from any thread until exit
  return *instance;
}

std::optional<std::string> configured_file(MissLog& state) {
  if (state.configured) return *state.configured;
  if (const char* path = detail::environment_text("ZEROJIT_MISSES_FILE")) return std::string(path);
  return std::nullopt;
}

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One line, written with one write(2) to an O_APPEND file: appends of other processes land
// before or after it, never inside it. 0 or the errno.
int append_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  const ssize_t written = ::write(fd, line.data(), line.size());
  const int error = written < 0                                        ? errno
                    : static_cast<std::size_t>(written) != line.size() ? ENOSPC
                                                                       : 0;
  ::close(fd);
  return error;
}

// The line's miss, or why it is skipped.
std::optional<LearnedMiss> parse_line(const std::string& line, std::string& why) {
  if (line.size() > kMaxLineBytes) {
    why = "longer than any line zerojit writes";
    return std::nullopt;
  }
  const Json json = Json::parse(line, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    why = "not a JSON object (a damaged or cut line)";
    return std::nullopt;
  }
  const auto version = json.find("zerojit_miss");
  if (version == json.end() || !version->is_number_integer() ||
      version->get<std::int64_t>() != kMissesFormatVersion) {
    why = "of another format version (" + (version == json.end() ? "none" : version->dump()) +
          "; this zerojit reads " + std::to_string(kMissesFormatVersion) + ")";
    return std::nullopt;
  }
  LearnedMiss miss;
  try {
    miss.kernel = json.at("kernel").get<std::string>();
    miss.key_text = json.at("key").get<std::string>();
    miss.key_json = json.at("key_json").dump();
    miss.descriptors = json.value("descriptors", std::string());
    miss.first_seen = miss.last_seen = json.at("time").get<std::int64_t>();
  } catch (const Json::exception& error) {
    why = std::string("a field is missing or of the wrong type (") + error.what() + ")";
    return std::nullopt;
  }
  if (miss.kernel.empty() || !json.at("key_json").is_object()) {
    why = "names no kernel, or its key_json is not an object";
    return std::nullopt;
  }
  miss.count = 1;
  return miss;
}

}  // namespace

void set_misses_file(std::optional<std::string> path) {
  MissLog& state = miss_log();
  std::lock_guard lock(state.mutex);
  state.configured = std::move(path);
  state.recorded.clear();
  state.write_failure_reported = false;
}

std::optional<std::string> misses_file() {
  MissLog& state = miss_log();
  std::lock_guard lock(state.mutex);
  return configured_file(state);
}

void record_miss(const std::string& kernel, const std::string& key_text,
                 const std::string& key_json, const std::string& descriptors) noexcept {
  try {
    MissLog& state = miss_log();
    std::unique_lock lock(state.mutex);
    const std::optional<std::string> path = configured_file(state);
    if (!path || !state.recorded.insert({kernel, key_text}).second) return;
    lock.unlock();
    Json line = {{"zerojit_miss", kMissesFormatVersion},
                 {"kernel", kernel},
                 {"key", key_text},
                 {"key_json", Json::parse(key_json, nullptr, false)},
                 {"descriptors", descriptors},
                 {"time", unix_seconds()},
                 {"pid", static_cast<std::int64_t>(::getpid())}};
    if (line["key_json"].is_discarded()) line["key_json"] = Json::object();
    std::string text = line.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    if (text.size() > kMaxLineBytes) {
      line["descriptors"] = descriptors.substr(0, 1024) + "...";
      text = line.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    }
    if (const int error = append_line(*path, text)) {
      lock.lock();
      if (std::exchange(state.write_failure_reported, true)) return;
      lock.unlock();
      log_warning("misses", "cannot record a runtime miss of " + kernel + " [" + key_text +
                                "] in " + *path + " (" + std::strerror(error) +
                                "); serving goes on, the next warmup will not learn it");
    }
  } catch (...) {
    // Recording a miss is best effort: the call it describes is served either way.
  }
}

MissesFile read_misses(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read the misses file " + path + ": " + std::strerror(errno));
  MissesFile file;
  std::map<std::pair<std::string, std::string>, std::size_t> index;  // -> position in misses
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    std::string why;
    std::optional<LearnedMiss> miss = parse_line(line, why);
    if (!miss) {
      file.skipped.push_back("line " + std::to_string(number) + ": " + why);
      continue;
    }
    const auto [it, added] = index.try_emplace({miss->kernel, miss->key_text}, file.misses.size());
    if (added) {
      file.misses.push_back(std::move(*miss));
      continue;
    }
    LearnedMiss& known = file.misses[it->second];
    known.count += 1;
    known.first_seen = std::min(known.first_seen, miss->first_seen);
    known.last_seen = std::max(known.last_seen, miss->last_seen);
  }
  return file;
}

}  // namespace zerojit

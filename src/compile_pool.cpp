#include "zerojit/compile_pool.hpp"

#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "zerojit/error.hpp"

namespace zerojit {
namespace {

// --- Framing: a message is a u64 length and that many bytes; inside, strings are a u64
// length and their bytes, lists a u64 count and their items. ----------------------------------

class Encoder {
 public:
  void number(std::uint64_t value) { bytes_.append(reinterpret_cast<const char*>(&value), 8); }
  void text(std::string_view value) {
    number(value.size());
    bytes_.append(value);
  }
  void texts(const std::vector<std::string>& values) {
    number(values.size());
    for (const auto& value : values) text(value);
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// A message that ends before its fields do: the other side is broken, not the compile.
struct TruncatedMessage {};

class Decoder {
 public:
  explicit Decoder(std::string_view bytes) : rest_(bytes) {}
  std::uint64_t number() {
    if (rest_.size() < 8) throw TruncatedMessage{};
    std::uint64_t value;
    std::memcpy(&value, rest_.data(), 8);
    rest_.remove_prefix(8);
    return value;
  }
  std::string text() {
    const std::uint64_t size = number();
    if (rest_.size() < size) throw TruncatedMessage{};
    std::string value(rest_.substr(0, size));
    rest_.remove_prefix(size);
    return value;
  }
  std::vector<std::string> texts() {
    const std::uint64_t count = number();
    std::vector<std::string> values;
    for (std::uint64_t i = 0; i < count; ++i) values.push_back(text());
    return values;
  }

 private:
  std::string_view rest_;
};

// Whether the worker at the other end of a socket is still worth waiting for; called between
// slices of a wait (null: wait as long as it takes, as the workers wait for their parent).
using StillWorthWaiting = std::function<bool()>;

// Waits until `socket` is ready for `events`, or `worth_waiting` says to give up (false).
bool wait_ready(int socket, short events, const StillWorthWaiting* worth_waiting,
                std::chrono::milliseconds slice) {
  if (worth_waiting == nullptr) return true;  // the blocking call itself waits
  for (;;) {
    pollfd item{socket, events, 0};
    const int ready = ::poll(&item, 1, static_cast<int>(slice.count()));
    if (ready > 0) return true;  // ready, or an error / hang-up the next call reports
    if (ready < 0 && errno != EINTR) return false;
    if (!(*worth_waiting)()) return false;
  }
}

bool send_all(int socket, const char* data, std::size_t size,
              const StillWorthWaiting* worth_waiting = nullptr,
              std::chrono::milliseconds slice = {}) {
  while (size > 0) {
    if (!wait_ready(socket, POLLOUT, worth_waiting, slice)) return false;
    const ssize_t sent = ::send(socket, data, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    data += sent;
    size -= static_cast<std::size_t>(sent);
  }
  return true;
}

bool receive_all(int socket, char* data, std::size_t size,
                 const StillWorthWaiting* worth_waiting = nullptr,
                 std::chrono::milliseconds slice = {}) {
  while (size > 0) {
    if (!wait_ready(socket, POLLIN, worth_waiting, slice)) return false;
    const ssize_t got = ::recv(socket, data, size, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    data += got;
    size -= static_cast<std::size_t>(got);
  }
  return true;
}

bool send_message(int socket, const std::string& payload,
                  const StillWorthWaiting* worth_waiting = nullptr,
                  std::chrono::milliseconds slice = {}) {
  const std::uint64_t size = payload.size();
  return send_all(socket, reinterpret_cast<const char*>(&size), 8, worth_waiting, slice) &&
         send_all(socket, payload.data(), payload.size(), worth_waiting, slice);
}

bool receive_message(int socket, std::string& payload,
                     const StillWorthWaiting* worth_waiting = nullptr,
                     std::chrono::milliseconds slice = {}) {
  std::uint64_t size = 0;
  if (!receive_all(socket, reinterpret_cast<char*>(&size), 8, worth_waiting, slice)) {
    return false;
  }
  payload.resize(size);
  return receive_all(socket, payload.data(), size, worth_waiting, slice);
}

// Watches a worker while a request is outstanding. A compile keeps a worker on the CPU; one
// that has used no CPU time for `stalled_after` (stopped by a signal, or stuck on a lock a
// fork copied in its held state) will never answer. Linux's /proc/<pid>/stat gives the state
// and the CPU ticks; where it cannot be read, the watch cannot tell and keeps waiting (the
// worker's death still shows as the socket closing).
class WorkerWatch {
 public:
  WorkerWatch(pid_t pid, std::chrono::milliseconds stalled_after)
      : path_("/proc/" + std::to_string(pid) + "/stat"),
        stalled_after_(stalled_after),
        last_progress_(std::chrono::steady_clock::now()) {}

  bool still_worth_waiting() {
    const auto now = std::chrono::steady_clock::now();
    const std::optional<std::uint64_t> ticks = running_ticks();
    if (!ticks) return true;
    if (*ticks != last_ticks_) {
      last_ticks_ = *ticks;
      last_progress_ = now;
    }
    stalled_ = now - last_progress_ >= stalled_after_;
    return !stalled_;
  }
  bool stalled() const { return stalled_; }

 private:
  // The worker's user + system CPU ticks; a stopped worker's count as unchanged.
  std::optional<std::uint64_t> running_ticks() const {
    std::FILE* file = std::fopen(path_.c_str(), "r");
    if (file == nullptr) return std::nullopt;
    char text[1024];
    const std::size_t length = std::fread(text, 1, sizeof text - 1, file);
    std::fclose(file);
    text[length] = '\0';
    // After the command name's closing parenthesis: state (field 3), ..., utime (14), stime (15).
    const char* rest = std::strrchr(text, ')');
    if (rest == nullptr) return std::nullopt;
    char state = 0;
    unsigned long long user = 0, system = 0;
    if (std::sscanf(rest + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu", &state,
                    &user, &system) != 3) {
      return std::nullopt;
    }
    if (state == 'T' || state == 't') return last_ticks_;
    return user + system;
  }

  std::string path_;
  std::chrono::milliseconds stalled_after_;
  std::chrono::steady_clock::time_point last_progress_;
  std::uint64_t last_ticks_ = ~std::uint64_t{0};
  bool stalled_ = false;
};

std::string encode_input(const NvrtcInput& input) {
  Encoder e;
  e.text(input.kernel_name);
  e.text(input.key_text);
  e.text(input.arch);
  e.text(input.source_path);
  e.text(input.source);
  e.texts(input.header_names);
  e.texts(input.header_texts);
  e.texts(input.name_expressions);
  e.texts(input.options);
  return e.bytes();
}

NvrtcInput decode_input(std::string_view bytes) {
  Decoder d(bytes);
  NvrtcInput input;
  input.kernel_name = d.text();
  input.key_text = d.text();
  input.arch = d.text();
  input.source_path = d.text();
  input.source = d.text();
  input.header_names = d.texts();
  input.header_texts = d.texts();
  input.name_expressions = d.texts();
  input.options = d.texts();
  return input;
}

enum Status : std::uint64_t { kCompiled = 0, kCompileError = 1, kOtherError = 2 };

std::string encode_output(const NvrtcOutput& output) {
  Encoder e;
  e.number(kCompiled);
  e.text(output.cubin);
  e.number(output.lowered_names.size());
  for (const auto& name : output.lowered_names) {
    e.text(name.expression);
    e.text(name.lowered);
  }
  e.text(output.log);
  std::uint64_t seconds_bits;
  std::memcpy(&seconds_bits, &output.compile_seconds, 8);
  e.number(seconds_bits);
  e.text(output.nvrtc_version);
  return e.bytes();
}

// Returns the output, or throws the error the worker reported.
NvrtcOutput decode_output(std::string_view bytes) {
  Decoder d(bytes);
  const std::uint64_t status = d.number();
  if (status == kCompileError) {
    std::string kernel = d.text();
    std::string key = d.text();
    std::string log = d.text();
    std::string message = d.text();
    throw CompileError(std::move(kernel), std::move(key), std::move(log), std::move(message));
  }
  if (status != kCompiled) throw Error(d.text());
  NvrtcOutput output;
  output.cubin = d.text();
  const std::uint64_t names = d.number();
  for (std::uint64_t i = 0; i < names; ++i) {
    LoweredName name;
    name.expression = d.text();
    name.lowered = d.text();
    output.lowered_names.push_back(std::move(name));
  }
  output.log = d.text();
  const std::uint64_t seconds_bits = d.number();
  std::memcpy(&output.compile_seconds, &seconds_bits, 8);
  output.nvrtc_version = d.text();
  return output;
}

// Closes every descriptor of a new worker but 0-2 and `socket`, which it returns renumbered.
// Whatever else the parent had open must not stay open in the worker: an flock()ed cache lock
// file, say, would stay locked for other processes after the parent closed it.
int keep_only_standard_streams_and(int socket) {
  constexpr int kWorkerSocket = 3;
  if (socket != kWorkerSocket) {
    if (::dup2(socket, kWorkerSocket) < 0) ::_exit(1);
    ::close(socket);
  }
#ifdef SYS_close_range
  const bool closed = ::syscall(SYS_close_range, kWorkerSocket + 1, ~0U, 0) == 0;
#else
  const bool closed = false;
#endif
  if (!closed) {
    // Kernels before 5.9: close what /proc lists (collected first: closing changes the list).
    std::vector<int> open;
    if (DIR* dir = ::opendir("/proc/self/fd")) {
      while (const dirent* entry = ::readdir(dir)) {
        const int fd = std::atoi(entry->d_name);
        if (fd > kWorkerSocket && fd != ::dirfd(dir)) open.push_back(fd);
      }
      ::closedir(dir);
    }
    for (int fd : open) ::close(fd);
  }
  return kWorkerSocket;
}

// The worker's whole life: compile what arrives until the socket closes.
[[noreturn]] void serve(int socket) {
  std::string request;
  while (receive_message(socket, request)) {
    Encoder reply;
    std::string response;
    try {
      response = encode_output(run_nvrtc(decode_input(request)));
    } catch (const TruncatedMessage&) {
      break;  // not a request of ours: leave, the parent falls back
    } catch (const CompileError& error) {
      reply.number(kCompileError);
      reply.text(error.kernel());
      reply.text(error.key());
      reply.text(error.log());
      reply.text(error.what());
      response = reply.bytes();
    } catch (const std::exception& error) {
      reply.number(kOtherError);
      reply.text(error.what());
      response = reply.bytes();
    }
    if (!send_message(socket, response)) break;
  }
  ::_exit(0);  // never run the parent's atexit handlers or static destructors
}

}  // namespace

CompileProcessPool::CompileProcessPool(int workers, std::chrono::milliseconds stalled_after)
    : wanted_(workers < 1 ? 1 : workers),
      stalled_after_(std::max(stalled_after, std::chrono::milliseconds(1))) {}

void CompileProcessPool::start() {
  for (int i = 0; i < wanted_; ++i) {
    int sockets[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) break;
    const pid_t pid = ::fork();
    if (pid == 0) {
      // The worker keeps only its own socket and the standard streams. It needs no other tie to
      // the parent: when the parent exits, however it ends, the socket closes and serve()
      // returns.
      serve(keep_only_standard_streams_and(sockets[1]));
    }
    ::close(sockets[1]);
    if (pid < 0) {
      ::close(sockets[0]);
      break;
    }
    Worker worker;
    worker.pid = pid;
    worker.socket = sockets[0];
    workers_.push_back(worker);
  }
}

CompileProcessPool::~CompileProcessPool() {
  for (Worker& worker : workers_) ::close(worker.socket);  // the worker sees EOF and exits
  // A worker still compiling finishes its compile first; one that does not exit within a few
  // seconds (it should not happen) is killed rather than waited for forever.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (Worker& worker : workers_) {
    for (;;) {
      int status = 0;
      const pid_t done = ::waitpid(worker.pid, &status, WNOHANG);
      if (done == worker.pid || (done < 0 && errno != EINTR)) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(worker.pid, SIGKILL);
        while (::waitpid(worker.pid, &status, 0) < 0 && errno == EINTR) {
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

CompileProcessPool::Worker* CompileProcessPool::acquire() {
  std::unique_lock lock(mutex_);
  for (;;) {
    bool any_usable = false;
    for (Worker& worker : workers_) {
      if (worker.broken) continue;
      any_usable = true;
      if (!worker.busy) {
        worker.busy = true;
        return &worker;
      }
    }
    if (!any_usable) return nullptr;
    idle_.wait(lock);
  }
}

void CompileProcessPool::release(Worker* worker, bool broken) {
  {
    std::lock_guard lock(mutex_);
    worker->busy = false;
    if (broken) {
      worker->broken = true;
      ++fallbacks_;
    }
  }
  idle_.notify_all();
}

int CompileProcessPool::fallbacks() const {
  std::lock_guard lock(mutex_);
  return fallbacks_;
}

int CompileProcessPool::workers() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(workers_.size());
}

NvrtcOutput CompileProcessPool::run(const NvrtcInput& input) {
  // Workers are forked at the first compile, so that a warmup served from the caches forks
  // nothing. Every compile of the pool waits here until they exist: no thread of this pool is
  // inside NVRTC while the fork copies the process.
  std::call_once(started_, [this] {
    std::lock_guard lock(mutex_);
    start();
  });
  Worker* worker = acquire();
  if (worker == nullptr) {  // every worker failed earlier
    {
      std::lock_guard lock(mutex_);
      ++fallbacks_;
    }
    return run_nvrtc(input);
  }
  std::string response;
  WorkerWatch watch(worker->pid, stalled_after_);
  const StillWorthWaiting worth_waiting = [&watch] { return watch.still_worth_waiting(); };
  const auto slice =
      std::clamp(stalled_after_ / 4, std::chrono::milliseconds(1), std::chrono::milliseconds(1000));
  if (!send_message(worker->socket, encode_input(input), &worth_waiting, slice) ||
      !receive_message(worker->socket, response, &worth_waiting, slice)) {
    if (watch.stalled()) ::kill(worker->pid, SIGKILL);  // reaped by the destructor
    release(worker, true);
    return run_nvrtc(input);  // nothing lost: compile here instead
  }
  try {
    NvrtcOutput output = decode_output(response);  // or the compile's own error, rethrown
    release(worker, false);
    return output;
  } catch (const TruncatedMessage&) {
    release(worker, true);
    return run_nvrtc(input);
  } catch (...) {
    release(worker, false);
    throw;
  }
}

}  // namespace zerojit

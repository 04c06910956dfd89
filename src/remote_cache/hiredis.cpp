// hiredis through dlopen. The few ABI pieces used are declared here rather than taken from
// <hiredis/hiredis.h>: the header installed at build time need not match the library found at
// run time, and two layouts are in use. hiredis 1.0 added a function table at the start of
// redisContext and a double (and a type tag) to redisReply; it also added
// redisConnectWithOptions, whose presence tells the layouts apart. The functions used
// (connect with a timeout, set a timeout, append a command from an argument vector, write and
// read the socket's buffers, take a reply from the reader, free) have kept their signatures
// from 0.13 to 1.2, and so have the first fields of redisContext and redisReader read here.
// docs/DESIGN.md, "Loading at run time".
#include "remote_cache/hiredis.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "environment.hpp"
#include "remote_cache/reply_scanner.hpp"
#include "remote_cache/socket_deadline.hpp"

namespace zerojit::detail::redis {
namespace {

// REDIS_REPLY_* and REDIS_ERR_*: the same numbers in every hiredis version.
constexpr int kReplyString = 1, kReplyArray = 2, kReplyInteger = 3, kReplyNil = 4, kReplyStatus = 5,
              kReplyError = 6;
constexpr int kErrTimeout = 6;  // hiredis >= 1.0; older ones say "timed out" in errstr

struct ContextV0 {  // hiredis < 1.0: redisContext starts with err, errstr
  int err;
  char errstr[128];
  int fd;
  int flags;
  char* obuf;
  void* reader;
};
struct ContextV1 {  // hiredis >= 1.0: a function table first
  const void* funcs;
  int err;
  char errstr[128];
  int fd;  // redisFD: an int outside Windows
  int flags;
  char* obuf;
  void* reader;
};
// The start of redisReader, the same from 0.13 to 1.2: the bytes received and not yet parsed
// are buf[pos, len). Only read, to check a reply before hiredis parses it (reply_scanner.hpp).
struct ReaderPrefix {
  int err;
  char errstr[128];
  char* buf;
  std::size_t pos;
  std::size_t len;
};
struct ReplyV0 {
  int type;
  long long integer;
  std::size_t len;
  char* str;
  std::size_t elements;
  ReplyV0** element;
};
struct ReplyV1 {
  int type;
  long long integer;
  double dval;
  std::size_t len;
  char* str;
  char vtype[4];
  std::size_t elements;
  ReplyV1** element;
};

using ConnectTcp = void* (*)(const char*, int, struct timeval);
using ConnectUnix = void* (*)(const char*, struct timeval);
using SetTimeout = int (*)(void*, struct timeval);
using AppendCommandArgv = int (*)(void*, int, const char**, const std::size_t*);
using BufferWrite = int (*)(void*, int*);
using BufferRead = int (*)(void*);
using GetReplyFromReader = int (*)(void*, void**);
using FreeReply = void (*)(void*);
using FreeContext = void (*)(void*);
using InitSsl = int (*)();
using CreateSslContext = void* (*)(const char*, const char*, const char*, const char*, const char*,
                                   int*);
using InitiateSsl = int (*)(void*, void*);

struct Library {
  bool loaded = false;
  std::string problem;
  bool v1 = false;
  ConnectTcp connect_tcp = nullptr;
  ConnectUnix connect_unix = nullptr;
  SetTimeout set_timeout = nullptr;
  AppendCommandArgv append_command_argv = nullptr;
  BufferWrite buffer_write = nullptr;
  BufferRead buffer_read = nullptr;
  GetReplyFromReader get_reply_from_reader = nullptr;
  FreeReply free_reply = nullptr;
  FreeContext free_context = nullptr;
  // TLS (libhiredis_ssl, hiredis >= 1.0), loaded when a rediss:// URL is first used.
  bool tls_tried = false;
  std::string tls_problem;
  void* tls_context = nullptr;  // one redisSSLContext for every connection
  InitiateSsl initiate_ssl = nullptr;
  std::string tls_ca;
};

Library& library() {
  static Library lib;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names;
    if (const char* named = detail::environment_text("ZEROJIT_HIREDIS_LIBRARY")) {
      names.emplace_back(named);
    } else {
      names = {"libhiredis.so.1.1.0", "libhiredis.so.1.0.0", "libhiredis.so.1",
               "libhiredis.so.0.14",  "libhiredis.so.0.13",  "libhiredis.so"};
    }
    void* handle = nullptr;
    std::string tried;
    for (const std::string& name : names) {
      handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) break;
      tried += (tried.empty() ? "" : ", ") + name;
    }
    if (handle == nullptr) {
      lib.problem = "hiredis is not installed (tried " + tried +
                    "; install libhiredis-dev or libhiredis1.1.0, or name the library in "
                    "ZEROJIT_HIREDIS_LIBRARY)";
      return;
    }
    auto symbol = [&](const char* name) { return ::dlsym(handle, name); };
    lib.connect_tcp = reinterpret_cast<ConnectTcp>(symbol("redisConnectWithTimeout"));
    lib.connect_unix = reinterpret_cast<ConnectUnix>(symbol("redisConnectUnixWithTimeout"));
    lib.set_timeout = reinterpret_cast<SetTimeout>(symbol("redisSetTimeout"));
    // A command is written and its reply read step by step (Connection::command), so that the
    // deadline and the reply's bounds apply between steps.
    lib.append_command_argv = reinterpret_cast<AppendCommandArgv>(symbol("redisAppendCommandArgv"));
    lib.buffer_write = reinterpret_cast<BufferWrite>(symbol("redisBufferWrite"));
    lib.buffer_read = reinterpret_cast<BufferRead>(symbol("redisBufferRead"));
    lib.get_reply_from_reader =
        reinterpret_cast<GetReplyFromReader>(symbol("redisGetReplyFromReader"));
    lib.free_reply = reinterpret_cast<FreeReply>(symbol("freeReplyObject"));
    lib.free_context = reinterpret_cast<FreeContext>(symbol("redisFree"));
    lib.v1 = symbol("redisConnectWithOptions") != nullptr;
    if (!lib.connect_tcp || !lib.connect_unix || !lib.set_timeout || !lib.append_command_argv ||
        !lib.buffer_write || !lib.buffer_read || !lib.get_reply_from_reader || !lib.free_reply ||
        !lib.free_context) {
      lib.problem = "the hiredis library found lacks a function zerojit needs (too old?)";
      return;
    }
    lib.loaded = true;
  });
  return lib;
}

// Sets up TLS once: libhiredis_ssl and one context (system CAs, or the given bundle).
std::string tls_problem(Library& lib, const std::string& ca_file) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (lib.tls_tried) return lib.tls_problem;
  lib.tls_tried = true;
  lib.tls_ca = ca_file;
  if (!lib.v1) {
    lib.tls_problem =
        "rediss:// needs hiredis >= 1.0 with TLS (libhiredis_ssl); the hiredis found "
        "is older";
    return lib.tls_problem;
  }
  void* handle = nullptr;
  for (const char* name : {"libhiredis_ssl.so.1.1.0", "libhiredis_ssl.so.1.0.0",
                           "libhiredis_ssl.so.1", "libhiredis_ssl.so"}) {
    handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
  }
  if (handle == nullptr) {
    lib.tls_problem =
        "rediss:// needs hiredis's TLS library (libhiredis_ssl), which is not "
        "installed";
    return lib.tls_problem;
  }
  auto init = reinterpret_cast<InitSsl>(::dlsym(handle, "redisInitOpenSSL"));
  auto create = reinterpret_cast<CreateSslContext>(::dlsym(handle, "redisCreateSSLContext"));
  lib.initiate_ssl = reinterpret_cast<InitiateSsl>(::dlsym(handle, "redisInitiateSSLWithContext"));
  if (!init || !create || !lib.initiate_ssl) {
    lib.tls_problem = "the libhiredis_ssl found lacks a function zerojit needs";
    return lib.tls_problem;
  }
  init();
  int error = 0;
  lib.tls_context = create(ca_file.empty() ? nullptr : ca_file.c_str(), nullptr, nullptr, nullptr,
                           nullptr, &error);
  if (lib.tls_context == nullptr) {
    lib.tls_problem = "could not set up TLS (hiredis error " + std::to_string(error) +
                      (ca_file.empty() ? "" : "; CA file " + ca_file) + ")";
  }
  return lib.tls_problem;
}

// The time left until `when`, at least a millisecond (a zero timeval means "no timeout" to
// hiredis).
std::chrono::milliseconds left_until(Clock::time_point when) {
  return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(when - Clock::now()),
                  std::chrono::milliseconds(1));
}

struct timeval to_timeval(std::chrono::milliseconds ms) {
  const auto count = std::max<std::int64_t>(ms.count(), 1);
  struct timeval tv {};
  tv.tv_sec = static_cast<time_t>(count / 1000);
  tv.tv_usec = static_cast<suseconds_t>((count % 1000) * 1000);
  return tv;
}

template <typename R>
Reply copy_reply(const R& r) {
  Reply out;
  switch (r.type) {
    case kReplyString:
      out.type = Reply::Type::string;
      break;
    case kReplyArray:
      out.type = Reply::Type::array;
      break;
    case kReplyInteger:
      out.type = Reply::Type::integer;
      break;
    case kReplyNil:
      out.type = Reply::Type::nil;
      break;
    case kReplyStatus:
      out.type = Reply::Type::status;
      break;
    case kReplyError:
      out.type = Reply::Type::error;
      break;
    default:
      out.type = Reply::Type::other;
  }
  out.integer = r.integer;
  if (r.str != nullptr &&
      (r.type == kReplyString || r.type == kReplyStatus || r.type == kReplyError)) {
    out.text.assign(r.str, r.len);
  }
  if (r.type == kReplyArray && r.element != nullptr) {
    out.elements.reserve(r.elements);
    for (std::size_t i = 0; i < r.elements; ++i) {
      if (r.element[i] != nullptr) out.elements.push_back(copy_reply(*r.element[i]));
    }
  }
  return out;
}

// The context's error, classified.
void context_error(const Library& lib, void* context, Outcome& outcome) {
  int err = 0;
  std::string text;
  if (context != nullptr) {
    if (lib.v1) {
      const auto* c = static_cast<const ContextV1*>(context);
      err = c->err;
      text.assign(c->errstr, ::strnlen(c->errstr, sizeof c->errstr));
    } else {
      const auto* c = static_cast<const ContextV0*>(context);
      err = c->err;
      text.assign(c->errstr, ::strnlen(c->errstr, sizeof c->errstr));
    }
  } else {
    text = "out of memory";
  }
  const bool timeout = err == kErrTimeout || text.find("timed out") != std::string::npos ||
                       text.find("emporarily unavailable") != std::string::npos ||
                       text.find("Timeout") != std::string::npos;
  outcome.failure = timeout ? Failure::timeout : Failure::io;
  outcome.error = text.empty() ? "connection error " + std::to_string(err) : text;
  if (timeout && text.find("emporarily unavailable") != std::string::npos) {
    outcome.error = "no reply within the command timeout";
  }
}

// Holds SIGPIPE blocked in this thread while hiredis writes: it writes with plain write() /
// send() without MSG_NOSIGNAL, so a write to a connection the server has closed (a restart,
// an idle timeout, CLIENT KILL) would raise SIGPIPE and end the process. Blocked, the write
// fails with EPIPE (an io failure, as any lost connection); a SIGPIPE that the write left
// pending is taken away before the mask is restored, unless one was pending already.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &previous_) == 0;
  }
  ~SigpipeBlocked() {
    if (!blocked_) return;
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec none{0, 0};
        while (sigtimedwait(&pipe_, nullptr, &none) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t previous_{};
  bool was_pending_ = false;
  bool blocked_ = false;
};

}  // namespace

std::string library_problem(bool tls) {
  Library& lib = library();
  if (!lib.loaded) return lib.problem;
  if (tls && lib.tls_tried) return lib.tls_problem;
  return {};
}

std::unique_ptr<Connection> Connection::open(const RedisUrl& url, const std::string& password,
                                             const ConnectionSettings& settings,
                                             Clock::time_point limit,
                                             Clock::time_point& command_deadline,
                                             Outcome& outcome) {
  Library& lib = library();
  if (!lib.loaded) {
    outcome.failure = Failure::misconfigured;
    outcome.error = lib.problem;
    return nullptr;
  }
  if (url.transport == RedisUrl::Transport::tls) {
    if (std::string problem = tls_problem(lib, settings.tls_ca_file); !problem.empty()) {
      outcome.failure = Failure::misconfigured;
      outcome.error = problem;
      return nullptr;
    }
  }
  const Clock::time_point connect_by = std::min(Clock::now() + settings.connect_timeout, limit);
  const struct timeval connect_within = to_timeval(left_until(connect_by));
  void* context = url.transport == RedisUrl::Transport::unix_socket
                      ? lib.connect_unix(url.path.c_str(), connect_within)
                      : lib.connect_tcp(url.host.c_str(), url.port, connect_within);
  std::unique_ptr<Connection> connection;
  if (context != nullptr) connection.reset(new Connection(context, settings.max_reply_bytes));
  const int err = context == nullptr ? -1
                  : lib.v1           ? static_cast<const ContextV1*>(context)->err
                                     : static_cast<const ContextV0*>(context)->err;
  if (err != 0) {
    context_error(lib, context, outcome);
    outcome.error = "cannot connect: " + outcome.error;
    return nullptr;
  }
  // Each read's and write's own bound; the command's deadline (SocketDeadline) is the real one.
  lib.set_timeout(context, to_timeval(settings.command_timeout));
  if (url.transport == RedisUrl::Transport::tls) {
    const SocketDeadline watch(connection->fd(), connect_by);
    bool handshake_failed = false;
    {
      const SigpipeBlocked no_sigpipe;
      handshake_failed = lib.initiate_ssl(context, lib.tls_context) != 0;
    }
    if (watch.expired()) {
      outcome.failure = Failure::timeout;
      outcome.error = "cannot connect: no TLS handshake within the connect timeout";
      return nullptr;
    }
    if (handshake_failed) {
      context_error(lib, context, outcome);
      outcome.error = "TLS handshake failed: " + outcome.error;
      return nullptr;
    }
  }
  command_deadline = std::min(Clock::now() + settings.command_timeout, limit);
  auto setup = [&](const std::vector<std::string_view>& args, const char* what) {
    Outcome done = connection->command(args, command_deadline);
    if (done.ok() && done.reply.type == Reply::Type::error) {
      done.failure = Failure::misconfigured;
      done.error = std::string(what) + " refused: " + done.reply.text;
    }
    if (!done.ok()) {
      outcome = done;
      return false;
    }
    return true;
  };
  if (!password.empty()) {
    std::vector<std::string_view> auth{"AUTH"};
    if (!url.user.empty()) auth.emplace_back(url.user);
    auth.emplace_back(password);
    if (!setup(auth, url.user.empty() ? "the password was" : "the user and password were")) {
      return nullptr;
    }
  }
  if (url.database != 0) {
    const std::string db = std::to_string(url.database);
    if (!setup({"SELECT", db}, ("database " + db + " was").c_str())) return nullptr;
  }
  return connection;
}

Connection::~Connection() { library().free_context(context_); }

int Connection::fd() const {
  return library().v1 ? static_cast<const ContextV1*>(context_)->fd
                      : static_cast<const ContextV0*>(context_)->fd;
}

Outcome Connection::command(const std::vector<std::string_view>& arguments,
                            Clock::time_point deadline) {
  Outcome outcome;
  if (Clock::now() < deadline) {
    const SocketDeadline watch(fd(), deadline);
    outcome = exchange(arguments);
    if (!watch.expired()) return outcome;
  }
  // Whatever hiredis made of the socket shut down under it (often "Server closed the
  // connection"), and a reply that completed just as the deadline passed: a timeout either way,
  // and the connection is gone.
  outcome = Outcome{};
  outcome.failure = Failure::timeout;
  outcome.error = "no complete reply within the command timeout";
  return outcome;
}

// Writes the command, reads until the scanner has a whole reply within the bounds, and only
// then lets hiredis parse it.
Outcome Connection::exchange(const std::vector<std::string_view>& arguments) {
  Library& lib = library();
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  argv.reserve(arguments.size());
  lengths.reserve(arguments.size());
  for (std::string_view a : arguments) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  Outcome outcome;
  const auto* reader =
      static_cast<const ReaderPrefix*>(lib.v1 ? static_cast<const ContextV1*>(context_)->reader
                                              : static_cast<const ContextV0*>(context_)->reader);
  if (reader->pos != reader->len) {
    outcome.failure = Failure::io;
    outcome.error = "the server sent " + std::to_string(reader->len - reader->pos) +
                    " bytes no command asked for";
    return outcome;
  }
  const SigpipeBlocked no_sigpipe;
  if (lib.append_command_argv(context_, static_cast<int>(argv.size()), argv.data(),
                              lengths.data()) != 0) {
    context_error(lib, context_, outcome);
    return outcome;
  }
  for (int written = 0; !written;) {
    if (lib.buffer_write(context_, &written) != 0) {
      context_error(lib, context_, outcome);
      return outcome;
    }
  }
  ReplyScanner scanner(ReplyLimits{.max_bytes = max_reply_bytes_});
  const std::size_t start = reader->pos;
  while (true) {
    // Read again each time: hiredis may have moved its buffer while appending to it.
    const auto state = scanner.scan(std::string_view(reader->buf + start, reader->len - start));
    if (state == ReplyScanner::State::complete) break;
    if (state == ReplyScanner::State::refused) {
      outcome.failure = Failure::io;
      outcome.error = scanner.problem();
      return outcome;
    }
    if (lib.buffer_read(context_) != 0) {
      context_error(lib, context_, outcome);
      return outcome;
    }
  }
  void* reply = nullptr;
  if (lib.get_reply_from_reader(context_, &reply) != 0 || reply == nullptr) {
    context_error(lib, context_, outcome);
    return outcome;
  }
  // Freed however the copy ends (it allocates, and may throw).
  const std::unique_ptr<void, void (*)(void*)> owned(reply,
                                                     [](void* r) { library().free_reply(r); });
  outcome.reply = lib.v1 ? copy_reply(*static_cast<const ReplyV1*>(reply))
                         : copy_reply(*static_cast<const ReplyV0*>(reply));
  return outcome;
}

}  // namespace zerojit::detail::redis

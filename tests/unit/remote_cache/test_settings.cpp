// The remote tier's settings, without a server: URLs, their redaction, and every malformed
// variable named in its error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "zerojit/disk_cache.hpp"
#include "zerojit/error.hpp"
#include "zerojit/remote_cache.hpp"

namespace zerojit {
namespace {

std::string error_of(std::string_view url) {
  try {
    parse_redis_url(url, "--remote-cache");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(RemoteCacheSettings, UrlsParseAndPrintWithoutTheirPassword) {
  const RedisUrl plain = parse_redis_url("redis://cache.internal", "X");
  EXPECT_EQ(plain.host, "cache.internal");
  EXPECT_EQ(plain.port, 6379);
  EXPECT_EQ(plain.database, 0);
  EXPECT_EQ(plain.redacted(), "redis://cache.internal:6379/0");

  const RedisUrl full = parse_redis_url("rediss://ci%40fleet:p%3Ass/word@10.0.0.7:6380/3", "X");
  EXPECT_EQ(full.transport, RedisUrl::Transport::tls);
  EXPECT_EQ(full.user, "ci@fleet");
  EXPECT_EQ(full.password, "p:ss/word");
  EXPECT_EQ(full.port, 6380);
  EXPECT_EQ(full.database, 3);
  EXPECT_EQ(full.redacted(), "rediss://ci@fleet:***@10.0.0.7:6380/3");

  const RedisUrl only_password = parse_redis_url("redis://:hunter2@[::1]:7000", "X");
  EXPECT_EQ(only_password.host, "::1");
  EXPECT_EQ(only_password.user, "");
  EXPECT_EQ(only_password.redacted(), "redis://:***@[::1]:7000/0");

  const RedisUrl socket = parse_redis_url("unix:///run/redis/redis.sock?db=2", "X");
  EXPECT_EQ(socket.transport, RedisUrl::Transport::unix_socket);
  EXPECT_EQ(socket.path, "/run/redis/redis.sock");
  EXPECT_EQ(socket.database, 2);
}

TEST(RemoteCacheSettings, BadUrlsAreRefusedByNameWithoutThePassword) {
  for (const char* bad : {"", "http://host", "redis://", "redis://host:0", "redis://host:70000",
                          "redis://host:", "redis://host/x", "redis://host/1?timeout=3",
                          "redis://u:p%zz@host", "unix://", "unix://host/sock", "redis://[::1"}) {
    const std::string message = error_of(bad);
    EXPECT_NE(message.find("--remote-cache"), std::string::npos) << bad << ": " << message;
  }
  const std::string message = error_of("redis://me:topsecret@host:99999");
  EXPECT_EQ(message.find("topsecret"), std::string::npos) << message;
  EXPECT_NE(message.find("redis://***@host:99999"), std::string::npos) << message;
}

TEST(RemoteCacheSettings, MalformedVariablesAreNamed) {
  const std::pair<const char*, const char*> bad[] = {
      {"ZEROJIT_REMOTE_CACHE_TIMEOUT_MS", "fast"}, {"ZEROJIT_REMOTE_CACHE_CONNECT_TIMEOUT_MS", "0"},
      {"ZEROJIT_REMOTE_CACHE_MAX_ENTRY", "64MB"},  {"ZEROJIT_REMOTE_CACHE_LOCK_TTL_MS", "5"},
      {"ZEROJIT_REMOTE_CACHE_LOCK_WAIT_S", "-1"},  {"ZEROJIT_REMOTE_CACHE_FAILURES", "0"},
      {"ZEROJIT_REMOTE_CACHE_BACKOFF_S", "1e3"},   {"ZEROJIT_REMOTE_CACHE_PREFIX", "a b"},
  };
  for (const auto& [name, value] : bad) {
    ::setenv(name, value, 1);
    try {
      default_remote_cache_options();
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(name), std::string::npos) << error.what();
    }
    ::unsetenv(name);
  }
  ::setenv("ZEROJIT_REMOTE_CACHE_MAX_ENTRY", "2M", 1);
  ::setenv("ZEROJIT_REMOTE_CACHE_LOCK_WAIT_S", "7", 1);
  const RemoteCacheOptions options = default_remote_cache_options();
  EXPECT_EQ(options.max_entry_bytes, 2u << 20);
  EXPECT_EQ(options.lock_wait, std::chrono::milliseconds(7000));
  ::unsetenv("ZEROJIT_REMOTE_CACHE_MAX_ENTRY");
  ::unsetenv("ZEROJIT_REMOTE_CACHE_LOCK_WAIT_S");
}

TEST(RemoteCacheSettings, AnEmptyPasswordVariableIsUnset) {
  // A deployment template that leaves it blank must not hide the URL's password (nor show a
  // redacted one that is never sent).
  ::setenv("ZEROJIT_REMOTE_CACHE", "redis://:secret@127.0.0.1:6379/0", 1);
  ::setenv("ZEROJIT_REMOTE_CACHE_PASSWORD", "", 1);
  const RemoteCacheOptions options = default_remote_cache_options();
  EXPECT_FALSE(options.password.has_value());
  ::unsetenv("ZEROJIT_REMOTE_CACHE_PASSWORD");
  ::unsetenv("ZEROJIT_REMOTE_CACHE");
}

TEST(RemoteCacheSettings, TheLibraryStoreLeavesOutAMalformedRemote) {
  ::setenv("ZEROJIT_REMOTE_CACHE", "redis//typo", 1);
  ::setenv("ZEROJIT_CACHE_DIR", "off", 1);
  EXPECT_EQ(make_default_artifact_store(), nullptr) << "memory only, the remote left out";
  ::setenv("ZEROJIT_REMOTE_CACHE", "redis://127.0.0.1:1/0", 1);
  const auto store = make_default_artifact_store();
  ASSERT_NE(remote_cache_of(store.get()), nullptr);
  EXPECT_EQ(local_store_of(store.get()), nullptr);
  ::unsetenv("ZEROJIT_REMOTE_CACHE");
  ::unsetenv("ZEROJIT_CACHE_DIR");
}

}  // namespace
}  // namespace zerojit

#include "remote_cache/reply_scanner.hpp"

#include <cstdio>
#include <optional>

namespace zerojit::detail::redis {
namespace {

// A RESP integer: an optional '-' and 1 to 18 digits (Redis's own bound is 2^63 - 1, and no
// reply zerojit reads comes near 10^18).
std::optional<std::int64_t> resp_number(std::string_view text) {
  const bool negative = text.starts_with('-');
  if (negative) text.remove_prefix(1);
  if (text.empty() || text.size() > 18) return std::nullopt;
  std::int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return negative ? -value : value;
}

}  // namespace

ReplyScanner::State ReplyScanner::refuse(std::string problem) {
  state_ = State::refused;
  problem_ = "refused a reply " + problem +
             " before reading it (a server that is not Redis, or a damaged connection)";
  return state_;
}

ReplyScanner::State ReplyScanner::scan(std::string_view bytes) {
  if (state_ != State::incomplete) return state_;
  if (bytes.size() > limits_.max_bytes) {
    return refuse("longer than " + std::to_string(limits_.max_bytes) +
                  " bytes (the entry limit and its framing)");
  }
  while (state_ == State::incomplete) {
    const Step step = next(bytes);
    if (step == Step::more) break;
    if (step == Step::item) close_item();
  }
  if (state_ == State::complete && position_ != bytes.size()) {
    return refuse("followed by " + std::to_string(bytes.size() - position_) +
                  " bytes no command asked for");
  }
  return state_;
}

ReplyScanner::Step ReplyScanner::next(std::string_view bytes) {
  const std::string_view rest = bytes.substr(position_);
  const std::size_t end = rest.find("\r\n");
  if (end == std::string_view::npos || end > limits_.max_line) {
    if (rest.size() > limits_.max_line + 1) {
      refuse("with a line of more than " + std::to_string(limits_.max_line) + " bytes");
    }
    return Step::more;
  }
  if (end == 0) {
    refuse("with an empty line where a reply type belongs");
    return Step::more;
  }
  const char type = rest[0];
  const std::string_view text = rest.substr(1, end - 1);
  const std::size_t line = end + 2;
  switch (type) {
    case '+':  // status
    case '-':  // error
      position_ += line;
      return Step::item;
    case ':':
      if (!resp_number(text)) {
        refuse("with an integer that is not one");
        return Step::more;
      }
      position_ += line;
      return Step::item;
    case '$': {
      const std::optional<std::int64_t> length = resp_number(text);
      if (!length || *length < -1) {
        refuse("with a bad value length");
        return Step::more;
      }
      if (*length == -1) {  // nil
        position_ += line;
        return Step::item;
      }
      const auto size = static_cast<std::uint64_t>(*length);
      if (size > limits_.max_bytes) {
        refuse("announcing a value of " + std::to_string(size) + " bytes, over the bound of " +
               std::to_string(limits_.max_bytes));
        return Step::more;
      }
      if (rest.size() < line + size + 2) return Step::more;
      if (rest.substr(line + size, 2) != "\r\n") {
        refuse("with a value not followed by CRLF");
        return Step::more;
      }
      position_ += line + size + 2;
      return Step::item;
    }
    case '*': {
      const std::optional<std::int64_t> count = resp_number(text);
      if (!count || *count < -1) {
        refuse("with a bad array length");
        return Step::more;
      }
      position_ += line;
      if (*count <= 0) return Step::item;  // nil or empty: nothing follows
      elements_ += static_cast<std::uint64_t>(*count);
      if (elements_ > limits_.max_elements) {
        refuse("announcing " + std::to_string(*count) + " array elements, more than the " +
               std::to_string(limits_.max_elements) + " any zerojit command is answered with");
        return Step::more;
      }
      if (pending_.size() >= limits_.max_depth) {
        refuse("with arrays nested more than " + std::to_string(limits_.max_depth) + " deep");
        return Step::more;
      }
      pending_.push_back(*count);
      return Step::opened;
    }
    default: {
      const auto byte = static_cast<unsigned char>(type);
      char shown[16];
      if (byte > 0x20 && byte < 0x7f) {
        std::snprintf(shown, sizeof shown, "'%c'", type);
      } else {
        std::snprintf(shown, sizeof shown, "byte 0x%02x", static_cast<unsigned>(byte));
      }
      refuse(std::string("of type ") + shown +
             ", which no zerojit command is answered with (RESP2: + - : $ *)");
      return Step::more;
    }
  }
}

void ReplyScanner::close_item() {
  while (!pending_.empty()) {
    if (--pending_.back() > 0) return;
    pending_.pop_back();  // that array is complete: an item of the one around it
  }
  state_ = State::complete;
}

}  // namespace zerojit::detail::redis

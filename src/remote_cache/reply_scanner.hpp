// Checks a Redis reply's bytes before hiredis parses them (docs/CACHE.md, "The remote tier"):
// hiredis allocates what a reply announces as soon as it reads the announcement (an array
// header of 2^31 elements is a 16 GiB table, a bulk length of 2^40 a buffer that size), so a
// server that lies, or something that is not Redis, could make one command cost seconds of CPU
// or all the memory there is. Every reply zerojit asks for is small and flat (a status, an
// integer, an entry, or an array of two of those), so the scanner refuses anything larger than
// the limits before a byte of it is allocated, and says when a reply is complete, so that
// hiredis is handed only whole replies within the limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zerojit::detail::redis {

struct ReplyLimits {
  std::uint64_t max_bytes = 0;       // the whole reply, headers included
  std::size_t max_elements = 64;     // array elements, summed over every array of the reply
  std::size_t max_depth = 4;         // arrays within arrays
  std::size_t max_line = 64 * 1024;  // a status, error, integer or length line
};

// A RESP2 reply (+status, -error, :integer, $bulk, *array; the only types zerojit's commands
// are answered with) checked as its bytes arrive. scan() is given the reply's bytes so far, a
// prefix that grows between calls, and remembers where it stopped.
class ReplyScanner {
 public:
  enum class State { incomplete, complete, refused };

  explicit ReplyScanner(ReplyLimits limits) : limits_(limits) {}

  State scan(std::string_view bytes);
  // Why the reply was refused (State::refused).
  const std::string& problem() const { return problem_; }

 private:
  // What reading at position_ did: need more bytes (or refused: state_ says which), finished
  // an item, or opened an array whose elements follow.
  enum class Step { more, item, opened };

  State refuse(std::string problem);
  Step next(std::string_view bytes);
  // One element of the innermost open array (or the whole reply) is complete.
  void close_item();

  ReplyLimits limits_;
  std::size_t position_ = 0;           // the first byte not yet accounted for
  std::vector<std::int64_t> pending_;  // elements still due in each open array, innermost last
  std::uint64_t elements_ = 0;
  State state_ = State::incomplete;
  std::string problem_;
};

}  // namespace zerojit::detail::redis

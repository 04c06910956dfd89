#include "zerojit/space.hpp"

namespace zerojit {

std::int64_t next_power_of_two(std::int64_t value) {
  std::int64_t power = 1;
  while (power <= value) power *= 2;
  return power;
}

}  // namespace zerojit

#include "zerojit/space.hpp"

#include <limits>

namespace zerojit {

std::int64_t next_power_of_two(std::int64_t value) {
  constexpr std::int64_t kLargestPower = std::int64_t{1} << 62;
  // Doubling past 2^62 would overflow (undefined behaviour, and in practice a negative power
  // that loops forever).
  if (value >= kLargestPower) return std::numeric_limits<std::int64_t>::max();
  std::int64_t power = 1;
  while (power <= value) power *= 2;
  return power;
}

}  // namespace zerojit

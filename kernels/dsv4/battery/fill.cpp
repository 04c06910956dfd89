#include <algorithm>
#include <bit>
#include <cstring>

#include "dsv4/battery/workspace.hpp"

namespace zerojit::dsv4::battery_internal {
namespace {

template <class T>
void put(std::vector<unsigned char>& bytes, std::size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

}  // namespace

std::uint16_t bf16_bits(float value) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest even (finite inputs)
  return static_cast<std::uint16_t>(bits >> 16);
}

// An E4M3 byte that is not NaN.
unsigned char e4m3_byte(Noise& noise) {
  auto byte = static_cast<unsigned char>(noise.next());
  if ((byte & 0x7F) == 0x7F) byte ^= 0x01;
  return byte;
}

// Fills `bytes` of a buffer by repeating `pattern` (whose size divides the stride of
// whatever structure it holds), so large caches are filled without a host copy of each.
void fill_tiled(BatteryMemory& memory, void* destination, std::size_t bytes,
                const std::vector<unsigned char>& pattern) {
  auto* out = static_cast<unsigned char*>(destination);
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t chunk = std::min(pattern.size(), bytes - done);
    memory.upload(out + done, pattern.data(), chunk);
    done += chunk;
  }
}

// Enough whole units of `unit_bytes` for a few MiB of pattern.
std::size_t pattern_units(std::size_t unit_bytes, std::int64_t units) {
  const std::size_t wanted = std::max<std::size_t>(1, (std::size_t{4} << 20) / unit_bytes);
  return std::min<std::size_t>(wanted, static_cast<std::size_t>(std::max<std::int64_t>(1, units)));
}

// fp8_ds_mla pages (spec 0.4): E4M3 nope bytes, BF16 rope values, sane UE8M0 scales, zero pad.
std::vector<unsigned char> ds_mla_pages(Noise& noise, std::int64_t rows, std::int64_t stride,
                                        std::size_t pages) {
  std::vector<unsigned char> bytes(pages * static_cast<std::size_t>(stride), 0);
  for (std::size_t page = 0; page < pages; ++page) {
    const std::size_t base = page * static_cast<std::size_t>(stride);
    for (std::int64_t row = 0; row < rows; ++row) {
      const std::size_t data = base + static_cast<std::size_t>(row * 576);
      for (int i = 0; i < 448; ++i) bytes[data + static_cast<std::size_t>(i)] = e4m3_byte(noise);
      for (int j = 0; j < 64; ++j) {
        put(bytes, data + 448 + 2 * static_cast<std::size_t>(j), bf16_bits(noise.uniform(-2, 2)));
      }
      const std::size_t scales = base + static_cast<std::size_t>(rows * 576 + row * 8);
      for (int k = 0; k < 7; ++k) {
        bytes[scales + static_cast<std::size_t>(k)] =
            static_cast<unsigned char>(120 + noise.next() % 10);
      }
    }
  }
  return bytes;
}

std::vector<unsigned char> float_pattern(Noise& noise, DType dtype, std::size_t elements, float low,
                                         float high) {
  std::vector<unsigned char> bytes(elements * static_cast<std::size_t>(dtype_size_bytes(dtype)));
  for (std::size_t i = 0; i < elements; ++i) {
    const float value = noise.uniform(low, high);
    if (dtype == DType::f32) {
      put(bytes, 4 * i, value);
    } else if (dtype == DType::bf16) {
      put(bytes, 2 * i, bf16_bits(value));
    } else {  // e4m3
      bytes[i] = e4m3_byte(noise);
    }
  }
  return bytes;
}

}  // namespace zerojit::dsv4::battery_internal

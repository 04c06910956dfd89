#include "languages/cutedsl/packer.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "languages/record_json.hpp"
#include "zerojit/dtype.hpp"
#include "zerojit/error.hpp"

namespace zerojit::languages {
namespace {

std::size_t align_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// One runtime argument of a CuTeDSL entry, as the key's program compiled it
// (python/zerojit/languages/cutedsl/program.py writes the spec).
struct CuteArgument {
  enum class Kind : std::uint8_t { tensor, scalar, stream, none };
  std::string name;
  Kind kind = Kind::tensor;
  // tensor: per mode, the extent (-1: dynamic), the divisibility of a dynamic one and the index
  // of its named symbol (-1: none); the same of the strides when they are explicit (`stride`
  // empty: compact in `stride_order`, whose order 0 is the innermost mode).
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> shape_div;
  std::vector<int> shape_sym;
  std::vector<std::int64_t> stride;
  std::vector<std::int64_t> stride_div;
  std::vector<int> stride_sym;
  std::vector<std::int64_t> stride_order;
  std::vector<std::string> symbols;  // the program's named symbols, by index (for messages)
  int shape_bytes = 4;               // of a dynamic extent in the struct (4 or 8)
  std::vector<int> dynamic_strides;  // the modes whose stride the struct carries
  int stride_bytes = 8;
  std::int64_t assumed_align = 16;  // bytes, of the data pointer
  std::vector<int> modes_by_order;  // the modes, innermost first (set once, read every call)
  // scalar: "i32", "i64", "f32", "f64", "bool"
  std::string type;

  // The struct the entry takes for a tensor: {void* data; dynamic extents; dynamic strides}.
  std::size_t strides_offset() const {
    std::size_t dynamic = 0;
    for (const std::int64_t extent : shape) dynamic += extent < 0 ? 1 : 0;
    return align_up(sizeof(void*) + dynamic * static_cast<std::size_t>(shape_bytes),
                    static_cast<std::size_t>(stride_bytes));
  }
  std::size_t struct_bytes() const {
    return align_up(
        strides_offset() + dynamic_strides.size() * static_cast<std::size_t>(stride_bytes),
        alignof(void*));
  }
};

CuteArgument parse_argument(const std::string& kernel, const OrderedJson& spec) {
  CuteArgument argument;
  argument.name = spec.at("name").get<std::string>();
  const auto kind = spec.at("kind").get<std::string>();
  if (kind == "stream" || kind == "none") {
    argument.kind = kind == "stream" ? CuteArgument::Kind::stream : CuteArgument::Kind::none;
    return argument;
  }
  if (kind == "scalar") {
    argument.kind = CuteArgument::Kind::scalar;
    argument.type = spec.at("type").get<std::string>();
    const auto& type = argument.type;
    if (type != "i32" && type != "i64" && type != "f32" && type != "f64" && type != "bool") {
      throw InvalidArgument(kernel, argument.name, "has no scalar type '" + type + "'");
    }
    return argument;
  }
  const auto dtype = parse_dtype(spec.at("dtype").get<std::string>());
  argument.shape = spec.at("shape").get<std::vector<std::int64_t>>();
  argument.shape_div = spec.at("shape_div").get<std::vector<std::int64_t>>();
  argument.shape_sym = spec.at("shape_sym").get<std::vector<int>>();
  if (!spec.at("stride").is_null())
    argument.stride = spec.at("stride").get<std::vector<std::int64_t>>();
  argument.stride_div = spec.at("stride_div").get<std::vector<std::int64_t>>();
  argument.stride_sym = spec.at("stride_sym").get<std::vector<int>>();
  argument.stride_order = spec.at("stride_order").get<std::vector<std::int64_t>>();
  argument.symbols = spec.at("symbols").get<std::vector<std::string>>();
  argument.shape_bytes = spec.at("shape_bytes").get<int>();
  argument.dynamic_strides = spec.at("dynamic_strides").get<std::vector<int>>();
  argument.stride_bytes = spec.at("stride_bytes").get<int>();
  argument.assumed_align = spec.at("assumed_align").get<std::int64_t>();
  const std::size_t modes = argument.shape.size();
  const auto symbols = static_cast<int>(argument.symbols.size());
  bool ok = argument.stride_order.size() == modes && argument.shape_div.size() == modes &&
            argument.shape_sym.size() == modes && argument.stride_div.size() == modes &&
            argument.stride_sym.size() == modes &&
            (argument.stride.empty() || argument.stride.size() == modes);
  for (const int mode : argument.dynamic_strides) {
    ok = ok && mode >= 0 && static_cast<std::size_t>(mode) < modes;
  }
  // The struct's strides are the dynamic ones, in mode order.
  ok = ok && std::is_sorted(argument.dynamic_strides.begin(), argument.dynamic_strides.end());
  for (std::size_t d = 0; ok && !argument.stride.empty() && d < modes; ++d) {
    const bool listed = std::find(argument.dynamic_strides.begin(), argument.dynamic_strides.end(),
                                  static_cast<int>(d)) != argument.dynamic_strides.end();
    ok = listed == (argument.stride[d] < 0);
  }
  for (std::size_t d = 0; ok && d < modes; ++d) {
    ok = argument.shape_div[d] >= 1 && argument.stride_div[d] >= 1 && argument.shape_sym[d] >= -1 &&
         argument.shape_sym[d] < symbols && argument.stride_sym[d] >= -1 &&
         argument.stride_sym[d] < symbols;
  }
  if (kind != "tensor" || !dtype || !ok || modes == 0 ||
      modes > static_cast<std::size_t>(kMaxTensorDims) ||
      (argument.shape_bytes != 4 && argument.shape_bytes != 8) ||
      (argument.stride_bytes != 4 && argument.stride_bytes != 8) || argument.assumed_align < 1) {
    throw InvalidArgument(kernel, argument.name, "has a malformed tensor specification");
  }
  argument.dtype = *dtype;
  for (std::size_t mode = 0; mode < modes; ++mode)
    argument.modes_by_order.push_back(static_cast<int>(mode));
  std::sort(argument.modes_by_order.begin(), argument.modes_by_order.end(), [&](int a, int b) {
    return argument.stride_order[static_cast<std::size_t>(a)] <
           argument.stride_order[static_cast<std::size_t>(b)];
  });
  return argument;
}

// The value each named symbol took in a call so far, and where it came from: the export takes
// every use of a symbol separately, and the compiled code may read any one of them.
struct SymbolValue {
  bool set = false;
  std::int64_t value = 0;
  const CuteArgument* from = nullptr;
  int dimension = 0;
  bool stride = false;
};

std::string where(const CuteArgument& argument, int d, bool stride) {
  return argument.name + "'s " + (stride ? "stride" : "extent") + " in dimension " +
         std::to_string(d);
}

// What differs between a tensor and its spec: "" when nothing does. A disagreement between a
// symbol's uses is a call whose arguments contradict each other, which no key covers (an
// InvalidArgument); anything else needs another specialization (a refusal, a monitor event).
struct Mismatch {
  Mismatch() = default;
  Mismatch(std::string what, bool contradicts = false)  // NOLINT: a reason converts
      : text(std::move(what)), contradiction(contradicts) {}
  std::string text;
  bool contradiction = false;
};

// "" when `value` (an extent or a stride of dimension d) may be symbol `index`'s, else why not.
std::string bind_symbol(std::vector<SymbolValue>& table, const CuteArgument& argument, int index,
                        std::int64_t value, int d, bool stride) {
  if (index < 0) return {};
  SymbolValue& symbol = table[static_cast<std::size_t>(index)];
  if (!symbol.set) {
    symbol = {true, value, &argument, d, stride};
    return {};
  }
  if (symbol.value == value) return {};
  return "has " + std::string(stride ? "stride " : "extent ") + std::to_string(value) +
         " in dimension " + std::to_string(d) + ", and the program's symbol '" +
         argument.symbols[static_cast<std::size_t>(index)] + "' is " +
         std::to_string(symbol.value) + " in this call (" +
         where(*symbol.from, symbol.dimension, symbol.stride) +
         "): every use of a symbol must have one value";
}

// The strides of a compact tensor: the mode of order 0 has stride 1, each next one the product
// of the extents before it (an extent of 1 takes any stride).
std::string compact_mismatch(const CuteArgument& spec, const TensorDesc& desc) {
  std::int64_t expected = 1;
  for (const int d : spec.modes_by_order) {
    if (desc.size(d) != 1 && desc.stride(d) != expected) {
      return "has stride " + std::to_string(desc.stride(d)) + " in dimension " + std::to_string(d) +
             " where the compact layout the program compiled has " + std::to_string(expected);
    }
    expected *= desc.size(d);
  }
  return {};
}

// Explicit strides: a static one as compiled (an extent of 1 takes any), a dynamic one a
// multiple of its divisibility and its symbol's value.
Mismatch stride_mismatch(const CuteArgument& spec, const TensorDesc& desc,
                         std::vector<SymbolValue>& symbols) {
  for (int d = 0; d < desc.ndim; ++d) {
    const auto m = static_cast<std::size_t>(d);
    const std::int64_t stride = desc.stride(d);
    if (spec.stride[m] >= 0) {
      if (desc.size(d) != 1 && stride != spec.stride[m]) {
        return "has stride " + std::to_string(stride) + " in dimension " + std::to_string(d) +
               ", and the program compiled it static at " + std::to_string(spec.stride[m]);
      }
      continue;
    }
    if (stride % spec.stride_div[m] != 0) {
      return "has stride " + std::to_string(stride) + " in dimension " + std::to_string(d) +
             ", and the program compiled it as a multiple of " + std::to_string(spec.stride_div[m]);
    }
    std::string problem = bind_symbol(symbols, spec, spec.stride_sym[m], stride, d, true);
    if (!problem.empty()) return {std::move(problem), true};
  }
  return {};
}

// What the compiled code assumes of a tensor and cannot check itself, checked: "" when the
// tensor is as compiled, else what differs.
Mismatch tensor_mismatch(const CuteArgument& spec, const TensorDesc& desc, const void* data,
                         std::vector<SymbolValue>& symbols) {
  const int ndim = static_cast<int>(spec.shape.size());
  if (desc.dtype != spec.dtype) {
    return "is " + std::string(dtype_name(desc.dtype)) + ", and the program compiled it as " +
           std::string(dtype_name(spec.dtype));
  }
  if (desc.ndim != ndim) {
    return "has " + std::to_string(desc.ndim) + " dimensions, and the program compiled " +
           std::to_string(ndim);
  }
  for (int d = 0; d < ndim; ++d) {
    const auto m = static_cast<std::size_t>(d);
    const std::int64_t extent = desc.size(d);
    const std::int64_t wanted = spec.shape[m];
    if (wanted >= 0) {
      if (extent != wanted) {
        return "has extent " + std::to_string(extent) + " in dimension " + std::to_string(d) +
               ", and the program compiled it static at " + std::to_string(wanted);
      }
      continue;
    }
    if (extent % spec.shape_div[m] != 0) {
      return "has extent " + std::to_string(extent) + " in dimension " + std::to_string(d) +
             ", and the program compiled it as a multiple of " + std::to_string(spec.shape_div[m]);
    }
    if (spec.shape_bytes == 4 && extent > INT32_MAX) {
      return "has extent " + std::to_string(extent) + " in dimension " + std::to_string(d) +
             ", past the 32-bit dynamic extents the program compiled";
    }
    std::string problem = bind_symbol(symbols, spec, spec.shape_sym[m], extent, d, false);
    if (!problem.empty()) return {std::move(problem), true};
  }
  Mismatch strides = spec.stride.empty() ? Mismatch{compact_mismatch(spec, desc)}
                                         : stride_mismatch(spec, desc, symbols);
  if (!strides.text.empty()) return strides;
  if (reinterpret_cast<std::uintptr_t>(data) % static_cast<std::uintptr_t>(spec.assumed_align) !=
      0) {
    return "has a data pointer that is not " + std::to_string(spec.assumed_align) +
           "-byte aligned, and the program compiled it as aligned";
  }
  return {};
}

// Writes `value` at `out` in `bytes` (4 or 8) bytes.
void put_integer(std::byte* out, std::int64_t value, int bytes) {
  if (bytes == 4) {
    const auto narrow = static_cast<std::int32_t>(value);
    std::memcpy(out, &narrow, 4);
  } else {
    std::memcpy(out, &value, 8);
  }
}

// Writes the tensor's struct at `out`: the data pointer, the dynamic extents, the dynamic
// strides, each at the width the export declared.
void fill_struct(const CuteArgument& spec, const TensorRef& tensor, std::byte* out) {
  std::memset(out, 0, spec.struct_bytes());
  std::memcpy(out, &tensor.data, sizeof(void*));
  std::size_t at = sizeof(void*);
  for (std::size_t d = 0; d < spec.shape.size(); ++d) {
    if (spec.shape[d] >= 0) continue;
    put_integer(out + at, tensor.desc.size(static_cast<int>(d)), spec.shape_bytes);
    at += static_cast<std::size_t>(spec.shape_bytes);
  }
  at = spec.strides_offset();
  for (const int d : spec.dynamic_strides) {
    put_integer(out + at, tensor.desc.stride(d), spec.stride_bytes);
    at += static_cast<std::size_t>(spec.stride_bytes);
  }
}

// Whether every value `key` takes in one mode, `wider` takes too: a static one equal, a dynamic
// one a multiple of the other's divisibility.
bool mode_covered(std::int64_t key, std::int64_t key_div, std::int64_t wider,
                  std::int64_t wider_div) {
  if (wider >= 0) return key == wider;
  return (key >= 0 ? key : key_div) % wider_div == 0;
}

// Whether every tensor `key`'s program accepts for an argument, `wider`'s accepts too: "" or why.
std::string argument_covers(const CuteArgument& key, const CuteArgument& wider) {
  if (key.kind != wider.kind) return "is of another kind in the fallback";
  if (key.kind == CuteArgument::Kind::scalar) {
    return key.type == wider.type ? "" : "is " + key.type + " and " + wider.type;
  }
  if (key.kind != CuteArgument::Kind::tensor) return "";
  if (key.dtype != wider.dtype || key.shape.size() != wider.shape.size() ||
      key.stride.empty() != wider.stride.empty() ||
      (key.stride.empty() && key.stride_order != wider.stride_order)) {
    return "is another tensor (dtype, rank or layout) in the fallback";
  }
  for (std::size_t d = 0; d < key.shape.size(); ++d) {
    const std::string mode = " in dimension " + std::to_string(d);
    if (!mode_covered(key.shape[d], key.shape_div[d], wider.shape[d], wider.shape_div[d]))
      return "has extents" + mode + " the fallback refuses";
    if (!key.stride.empty() &&
        !mode_covered(key.stride[d], key.stride_div[d], wider.stride[d], wider.stride_div[d]))
      return "has strides" + mode + " the fallback refuses";
    // A symbol the fallback shares and the key does not refuses calls the key takes.
    if ((wider.shape_sym[d] >= 0 && key.shape_sym[d] < 0) ||
        (wider.stride_sym[d] >= 0 && key.stride_sym[d] < 0))
      return "is free" + mode + " where the fallback ties it to a symbol";
    if (key.shape[d] < 0 && wider.shape[d] < 0 && wider.shape_bytes < key.shape_bytes)
      return "has wider dynamic extents than the fallback";
  }
  return key.assumed_align % wider.assumed_align == 0 ? "" : "is aligned less than the fallback";
}

class CutePacker final : public SpecPacker<CuteArgument> {
 public:
  explicit CutePacker(std::string_view kernel)
      : SpecPacker(kernel, &parse_argument, &argument_covers) {}

  void pack(const CallToPack& call, PackFailure& failure, PackedCall& out) override {
    const std::vector<CuteArgument>& spec = specs_[call.slot];
    // The entry's argument pointers: a struct per tensor, a value per scalar, the stream, and
    // the entry's return code last; an optional tensor compiled absent takes none. Reused from
    // call to call (one call at a time per thread).
    thread_local std::vector<std::byte> storage;
    thread_local std::vector<void*> pointers;
    thread_local std::vector<SymbolValue> symbols;
    std::size_t bytes = 8;  // the return code
    std::size_t named = 0;
    for (const CuteArgument& argument : spec) {
      bytes += align_up(argument.struct_bytes(), 8) + 8;
      named = std::max(named, argument.symbols.size());
    }
    if (storage.size() < bytes) storage.resize(bytes);
    symbols.assign(named, SymbolValue{});
    pointers.clear();
    std::size_t at = 0;
    std::size_t next = 0;  // the call value the next non-stream argument takes
    for (const CuteArgument& argument : spec) {
      std::byte* slot = storage.data() + at;
      if (argument.kind == CuteArgument::Kind::stream) {
        pointers.push_back(slot);
        std::memcpy(slot, &call.stream, sizeof call.stream);
        at += 8;
        continue;
      }
      const CallValue& value = call.values[next++];
      if (argument.kind == CuteArgument::Kind::none) {
        if (value.kind != CallValue::Kind::none) {
          failure.refuse(argument.name, "is " + kind_name(value.kind) +
                                            ", and the program compiled it absent (None)");
        }
        continue;
      }
      pointers.push_back(slot);
      if (argument.kind == CuteArgument::Kind::tensor) {
        if (value.kind != CallValue::Kind::tensor) {
          failure.refuse(argument.name,
                         "is " + kind_name(value.kind) + ", and the program compiled a tensor");
        }
        const Mismatch mismatch =
            tensor_mismatch(argument, value.tensor.desc, value.tensor.data, symbols);
        if (mismatch.contradiction) failure.fail(argument.name, mismatch.text);
        if (!mismatch.text.empty()) failure.refuse(argument.name, mismatch.text);
        fill_struct(argument, value.tensor, slot);
        at += align_up(argument.struct_bytes(), 8);
        continue;
      }
      pack_scalar(argument, value, failure, slot);
      at += 8;
    }
    auto* status = reinterpret_cast<std::int32_t*>(storage.data() + at);
    *status = 0;
    pointers.push_back(status);
    out.host_args = pointers.data();
    out.host_count = pointers.size();
  }

 private:
  static void pack_scalar(const CuteArgument& argument, const CallValue& value,
                          PackFailure& failure, std::byte* out) {
    const std::string& type = argument.type;
    if (type == "bool") {
      if (value.kind != CallValue::Kind::boolean)
        failure.fail(argument.name, "must be True or False");
      const std::uint8_t flag = value.flag ? 1 : 0;
      std::memcpy(out, &flag, 1);
      return;
    }
    if (type == "f32" || type == "f64") {
      if (value.kind != CallValue::Kind::floating && value.kind != CallValue::Kind::integer) {
        failure.fail(argument.name, "must be a number, got " + kind_name(value.kind));
      }
      const double number = value.kind == CallValue::Kind::floating
                                ? value.number
                                : static_cast<double>(value.integer);
      if (type == "f32") {
        const auto narrow = static_cast<float>(number);
        std::memcpy(out, &narrow, 4);
      } else {
        std::memcpy(out, &number, 8);
      }
      return;
    }
    if (value.kind != CallValue::Kind::integer || value.above_int64 ||
        (type == "i32" && (value.integer < INT32_MIN || value.integer > INT32_MAX))) {
      failure.refuse(argument.name,
                     "= " +
                         (value.kind == CallValue::Kind::integer ? integer_text(value)
                                                                 : kind_name(value.kind)) +
                         " is no " + type + ", the type the program compiled");
    }
    put_integer(out, value.integer, type == "i32" ? 4 : 8);
  }
};

}  // namespace

std::unique_ptr<ArgumentPacker> make_cutedsl_packer(std::string_view kernel) {
  return std::make_unique<CutePacker>(kernel);
}

}  // namespace zerojit::languages

// A stub CUDA driver: a shared library the CPU tests and the host-cost benchmark load in place of
// libcuda.so.1 (ZEROJIT_TESTING_CUDA_DRIVER names it; only tests and benchmarks set it), and in
// place of the CuTeDSL runtime (ZEROJIT_CUTE_DSL_RUNTIME). It accepts module loads and launches,
// records what it was given and returns, so that the whole call path (descriptors, dispatch memo,
// executor lookup, checks, packing, the launch call) runs and is checked without a GPU.
//
// What it reports about a module comes from the image itself: the parameter sizes of a cubin's
// kernels are read from its ELF `.nv.info.<kernel>` sections (EIATTR_KPARAM_INFO), so the
// launch check compares the packed arguments with what the compiler really emitted.
//
// Events go to an in-process list (zerojit_stub_events) and, when ZEROJIT_STUB_LOG names a
// file, one JSON line each appended to it (O_APPEND: many processes may share one log).
//
// It also lends device tensors without a framework: a test registers a Python object's address
// with a data pointer, dtype and shape (zerojit_stub_register_tensor), and a class whose
// `__dlpack_c_exchange_api__` is zerojit_stub_exchange_api()'s address is read through DLPack's
// exchange API, as PyTorch's tensors are: no capsule, no Python, a call's real import cost.
// Settings: ZEROJIT_STUB_DEVICES (1), ZEROJIT_STUB_COMPUTE (90: sm_90a), ZEROJIT_STUB_SMS (132),
// ZEROJIT_STUB_COUNT_ONLY=1 (a benchmark's: launches and host runs are counted, not recorded, so
// that the stub's own share of a call is a few nanoseconds).
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dlpack_abi.hpp"  // python/src: the module's DLPack layout, one definition

namespace {

using Result = int;
constexpr Result kSuccess = 0;
constexpr Result kInvalidValue = 1;
constexpr Result kNotInitialized = 3;
constexpr Result kInvalidDevice = 101;
constexpr Result kInvalidImage = 200;
constexpr Result kNotFound = 500;
constexpr Result kNotSupported = 801;

struct Function {
  std::string name;
  std::vector<std::uint32_t> param_sizes;  // from the image; empty when it says nothing
  bool sizes_known = false;
};

struct Module {
  std::string image;
  std::map<std::string, std::unique_ptr<Function>> functions;
};

struct State {
  bool count_only = false;
  std::atomic<unsigned long long> counted{0};
  std::mutex mutex;
  std::vector<std::string> events;
  std::vector<std::unique_ptr<Module>> modules;
  std::vector<std::unique_ptr<Function>> host_functions;
  int log = -1;
  std::atomic<int> capturing{0};
  std::atomic<unsigned long long> sequence{0};
};

State& state() {
  static State* instance = [] {
    auto* made = new State();  // used until exit by any thread
    const char* count_only = std::getenv("ZEROJIT_STUB_COUNT_ONLY");
    made->count_only = count_only != nullptr && std::string_view(count_only) == "1";
    if (const char* path = std::getenv("ZEROJIT_STUB_LOG")) {
      made->log = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    }
    return made;
  }();
  return *instance;
}

int setting(const char* name, int fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::atoi(text) : fallback;
}

std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// One event: {"seq":n,"pid":p,"event":"...", <fields>}.
void record(std::string_view event, const std::string& fields = {}) {
  State& s = state();
  const unsigned long long seq = s.sequence.fetch_add(1);
  std::string line = "{\"seq\":" + std::to_string(seq) + ",\"pid\":" + std::to_string(::getpid()) +
                     ",\"event\":" + quoted(event) + (fields.empty() ? "" : "," + fields) + "}";
  std::lock_guard lock(s.mutex);
  if (s.log >= 0) {
    const std::string with_newline = line + "\n";
    if (::write(s.log, with_newline.data(), with_newline.size()) < 0) {
      // A test that cannot log sees its events missing; nothing else to do here.
    }
  }
  s.events.push_back(std::move(line));
}

// In count-only mode, counts a launch and says so (it is then not recorded).
bool counted() {
  State& s = state();
  if (!s.count_only) return false;
  s.counted.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// --- Cubin parameter sizes ---------------------------------------------------------------------

constexpr std::uint8_t kFormatSizedValue = 0x04;    // EIFMT_SVAL: a 16-bit size, then the value
constexpr std::uint8_t kAttributeParamInfo = 0x17;  // EIATTR_KPARAM_INFO

template <class T>
bool read_at(std::string_view image, std::size_t offset, T& out) {
  if (offset > image.size() || image.size() - offset < sizeof(T)) return false;
  std::memcpy(&out, image.data() + offset, sizeof(T));
  return true;
}

// The parameter sizes of `kernel` as its `.nv.info.<kernel>` section lists them; false when the
// image is no ELF64 or has no such section.
bool parameter_sizes(std::string_view image, const std::string& kernel,
                     std::vector<std::uint32_t>& sizes) {
  Elf64_Ehdr header{};
  if (!read_at(image, 0, header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_shentsize != sizeof(Elf64_Shdr)) {
    return false;
  }
  Elf64_Shdr names{};
  if (!read_at(image, header.e_shoff + header.e_shstrndx * sizeof(Elf64_Shdr), names)) return false;
  const std::string wanted = ".nv.info." + kernel;
  for (std::size_t i = 0; i < header.e_shnum; ++i) {
    Elf64_Shdr section{};
    if (!read_at(image, header.e_shoff + i * sizeof(Elf64_Shdr), section)) return false;
    const std::size_t name_at = names.sh_offset + section.sh_name;
    if (name_at >= image.size()) continue;
    const std::string_view name(image.data() + name_at,
                                strnlen(image.data() + name_at, image.size() - name_at));
    if (name != wanted) continue;
    std::map<std::uint32_t, std::uint32_t> by_ordinal;
    std::size_t at = section.sh_offset;
    const std::size_t end = section.sh_offset + section.sh_size;
    while (at + 4 <= end && end <= image.size()) {
      const auto format = static_cast<std::uint8_t>(image[at]);
      const auto attribute = static_cast<std::uint8_t>(image[at + 1]);
      std::uint16_t value_bytes = 0;
      read_at(image, at + 2, value_bytes);
      if (format != kFormatSizedValue) {
        at += 4;  // a fixed-size attribute: its value is the 16 bits just read
        continue;
      }
      if (attribute == kAttributeParamInfo && value_bytes >= 12) {
        std::uint16_t ordinal = 0;
        std::uint32_t flags = 0;
        read_at(image, at + 8, ordinal);
        read_at(image, at + 12, flags);
        by_ordinal[ordinal] = (flags >> 18) & 0x3fff;
      }
      at += 4 + value_bytes;
    }
    sizes.clear();
    for (const auto& [ordinal, size] : by_ordinal) {
      if (ordinal != sizes.size()) return false;  // a gap: not the layout this reader knows
      sizes.push_back(size);
    }
    return true;
  }
  return false;
}

std::string hex(const void* data, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

// The parameters of a launch as hex, one string each, where the function's sizes are known.
std::string parameters_json(const Function& function, void** params) {
  if (!function.sizes_known || params == nullptr) return "null";
  std::string out = "[";
  for (std::size_t i = 0; i < function.param_sizes.size(); ++i) {
    out += (i ? "," : "") + quoted(hex(params[i], function.param_sizes[i]));
  }
  return out + "]";
}

struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int flag;
    struct {
      unsigned x, y, z;
    } cluster;
  } value;
};
struct LaunchConfig {
  unsigned grid_x, grid_y, grid_z;
  unsigned block_x, block_y, block_z;
  unsigned shared_bytes;
  void* stream;
  LaunchAttribute* attributes;
  unsigned attribute_count;
};

std::string launch_fields(const Function& function, const unsigned grid[3], const unsigned block[3],
                          unsigned shared, void* stream, void** params) {
  char geometry[200];
  std::snprintf(geometry, sizeof geometry,
                "\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shared\":%u,\"stream\":%llu", grid[0],
                grid[1], grid[2], block[0], block[1], block[2], shared,
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(stream)));
  return "\"function\":" + quoted(function.name) + "," + geometry +
         ",\"params\":" + parameters_json(function, params);
}

// --- Device tensors through DLPack's exchange API (dlpack.h 1.2) --------------------------------

namespace dl = zerojit::python::dlpack;
using dl::DLDataType;
using dl::DLDevice;
using dl::DLTensor;

struct RegisteredTensor {
  void* data = nullptr;
  DLDataType dtype{};
  std::vector<std::int64_t> shape;
};

std::mutex& tensors_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
std::map<const void*, RegisteredTensor>& tensors() {
  static auto* registered = new std::map<const void*, RegisteredTensor>();
  return *registered;
}

int tensor_of(void* object, DLTensor* out) {
  std::lock_guard lock(tensors_mutex());
  const auto found = tensors().find(object);
  // A tensor object the test never registered: a broken test, stopped where it is (returning an
  // error would need a Python exception, and the stub has no Python).
  if (found == tensors().end()) std::abort();
  RegisteredTensor& tensor = found->second;
  *out = DLTensor{tensor.data,
                  DLDevice{dl::kDLCUDA, 0},
                  static_cast<std::int32_t>(tensor.shape.size()),
                  tensor.dtype,
                  tensor.shape.data(),
                  nullptr,
                  0};
  return 0;
}

int current_stream(std::int32_t, std::int32_t, void** stream) {
  *stream = nullptr;
  return 0;
}

const dl::DLPackExchangeAPI kExchangeApi = {{{1, 2}, nullptr}, nullptr,    nullptr,
                                            nullptr,           &tensor_of, &current_stream};

}  // namespace

extern "C" {

// The exchange API table, for a tensor class's `__dlpack_c_exchange_api__`.
const void* zerojit_stub_exchange_api() { return &kExchangeApi; }

// A CUDA tensor on device 0 read through the exchange API: `object` is its Python object's
// address (id()), `data` a pointer the stub never dereferences, `code`/`bits` DLPack's dtype.
void zerojit_stub_register_tensor(const void* object, void* data, std::uint8_t code,
                                  std::uint8_t bits, std::int32_t ndim, const std::int64_t* shape) {
  RegisteredTensor tensor{data, DLDataType{code, bits, 1}, {shape, shape + ndim}};
  std::lock_guard lock(tensors_mutex());
  tensors()[object] = std::move(tensor);
}
void zerojit_stub_forget_tensor(const void* object) {
  std::lock_guard lock(tensors_mutex());
  tensors().erase(object);
}

// --- What tests ask of the stub -----------------------------------------------------------------

// The events recorded in this process so far, one JSON object a line; returns the bytes needed
// (a larger buffer is filled, NUL-terminated).
std::size_t zerojit_stub_events(char* buffer, std::size_t size) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  std::string text;
  for (const std::string& line : s.events) text += line + "\n";
  if (buffer != nullptr && size > text.size()) std::memcpy(buffer, text.c_str(), text.size() + 1);
  return text.size() + 1;
}

// Launches and host runs counted in count-only mode.
unsigned long long zerojit_stub_counted() { return state().counted.load(); }

void zerojit_stub_clear() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.events.clear();
}

// A test's own event, ordered with the stub's ("returned from the call").
void zerojit_stub_mark(const char* text) { record("mark", "\"text\":" + quoted(text)); }

// Whether every stream reports an active capture.
void zerojit_stub_set_capturing(int capturing) { state().capturing.store(capturing); }

// --- The driver API zerojit loads (include/zerojit/cuda.hpp) ------------------------------------

Result cuInit(unsigned) { return kSuccess; }
Result cuDriverGetVersion(int* version) {
  *version = 13000;
  return kSuccess;
}
Result cuGetErrorName(Result error, const char** name) {
  static const std::map<Result, const char*> names = {
      {kSuccess, "CUDA_SUCCESS"},
      {kInvalidValue, "CUDA_ERROR_INVALID_VALUE"},
      {kNotInitialized, "CUDA_ERROR_NOT_INITIALIZED"},
      {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE"},
      {kInvalidImage, "CUDA_ERROR_INVALID_IMAGE"},
      {kNotFound, "CUDA_ERROR_NOT_FOUND"},
      {kNotSupported, "CUDA_ERROR_NOT_SUPPORTED"}};
  const auto found = names.find(error);
  *name = found != names.end() ? found->second : "CUDA_ERROR_UNKNOWN";
  return kSuccess;
}
Result cuGetErrorString(Result error, const char** text) {
  cuGetErrorName(error, text);
  return kSuccess;
}
Result cuDeviceGetCount(int* count) {
  *count = setting("ZEROJIT_STUB_DEVICES", 1);
  return kSuccess;
}
Result cuDeviceGet(int* device, int ordinal) {
  if (ordinal < 0 || ordinal >= setting("ZEROJIT_STUB_DEVICES", 1)) return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}
Result cuDeviceGetAttribute(int* value, int attribute, int) {
  const int compute = setting("ZEROJIT_STUB_COMPUTE", 90);
  switch (attribute) {
    case 16:  // multiprocessors
      *value = setting("ZEROJIT_STUB_SMS", 132);
      return kSuccess;
    case 38:  // L2 bytes
      *value = 50 << 20;
      return kSuccess;
    case 75:
      *value = compute / 10;
      return kSuccess;
    case 76:
      *value = compute % 10;
      return kSuccess;
    case 97:  // shared memory per block, opt-in
      *value = 227 * 1024;
      return kSuccess;
    default:
      *value = 0;
      return kSuccess;
  }
}
Result cuDeviceGetName(char* name, int length, int device) {
  std::snprintf(name, static_cast<std::size_t>(length), "zerojit stub device %d", device);
  return kSuccess;
}
Result cuDevicePrimaryCtxRetain(void** context, int device) {
  static char contexts[64];
  if (device < 0 || device >= 64) return kInvalidDevice;
  *context = &contexts[device];
  return kSuccess;
}
Result cuDevicePrimaryCtxRelease_v2(int) { return kSuccess; }
thread_local void* current_context = nullptr;
Result cuCtxSetCurrent(void* context) {
  current_context = context;
  return kSuccess;
}
Result cuCtxGetCurrent(void** context) {
  *context = current_context;
  return kSuccess;
}
Result cuCtxSynchronize() { return kSuccess; }

Result cuModuleLoadData(void** module, const void* image) {
  if (image == nullptr) return kInvalidValue;
  // A cubin's size is in its ELF header (section headers end it); anything else is refused.
  Elf64_Ehdr header{};
  std::memcpy(&header, image, sizeof header);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) return kInvalidImage;
  const std::size_t size = header.e_shoff + header.e_shnum * sizeof(Elf64_Shdr);
  auto made = std::make_unique<Module>();
  made->image.assign(static_cast<const char*>(image), size);
  *module = made.get();
  record("module_load", "\"bytes\":" + std::to_string(size));
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.modules.push_back(std::move(made));
  return kSuccess;
}
Result cuModuleUnload(void*) { return kSuccess; }
Result cuModuleGetFunction(void** function, void* module, const char* name) {
  auto* owner = static_cast<Module*>(module);
  std::lock_guard lock(state().mutex);
  auto& slot = owner->functions[name];
  if (!slot) {
    slot = std::make_unique<Function>();
    slot->name = name;
    slot->sizes_known = parameter_sizes(owner->image, name, slot->param_sizes);
    if (!slot->sizes_known && owner->image.find(name) == std::string::npos) {
      owner->functions.erase(name);
      return kNotFound;
    }
  }
  *function = slot.get();
  return kSuccess;
}
Result cuFuncGetAttribute(int* value, int, void*) {
  *value = 0;
  return kSuccess;
}
Result cuFuncSetAttribute(void* function, int attribute, int value) {
  record("function_attribute", "\"function\":" + quoted(static_cast<Function*>(function)->name) +
                                   ",\"attribute\":" + std::to_string(attribute) +
                                   ",\"value\":" + std::to_string(value));
  return kSuccess;
}
Result cuFuncGetParamInfo(void* function, std::size_t index, std::size_t* offset,
                          std::size_t* size) {
  const auto* f = static_cast<const Function*>(function);
  if (!f->sizes_known || index >= f->param_sizes.size()) return kInvalidValue;
  std::size_t at = 0;
  for (std::size_t i = 0; i < index; ++i) at += f->param_sizes[i];
  *offset = at;
  *size = f->param_sizes[index];
  return kSuccess;
}
Result cuFuncLoad(void*) { return kSuccess; }

Result cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                      unsigned by, unsigned bz, unsigned shared, void* stream, void** params,
                      void**) {
  if (counted()) return kSuccess;
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  record("launch",
         launch_fields(*static_cast<Function*>(function), grid, block, shared, stream, params));
  return kSuccess;
}
Result cuLaunchKernelEx(const LaunchConfig* config, void* function, void** params, void**) {
  if (counted()) return kSuccess;
  const unsigned grid[3] = {config->grid_x, config->grid_y, config->grid_z};
  const unsigned block[3] = {config->block_x, config->block_y, config->block_z};
  std::string attributes = "{";
  for (unsigned i = 0; i < config->attribute_count; ++i) {
    const LaunchAttribute& a = config->attributes[i];
    attributes += (i ? "," : "") + quoted(std::to_string(a.id)) + ":";
    attributes += a.id == 4 ? "[" + std::to_string(a.value.cluster.x) + "," +
                                  std::to_string(a.value.cluster.y) + "," +
                                  std::to_string(a.value.cluster.z) + "]"
                            : std::to_string(a.value.flag);
  }
  record("launch", launch_fields(*static_cast<Function*>(function), grid, block,
                                 config->shared_bytes, config->stream, params) +
                       ",\"attributes\":" + attributes + "}");
  return kSuccess;
}

Result cuStreamCreate(void** stream, unsigned) {
  static std::atomic<std::uintptr_t> next{0x1000};
  *stream = reinterpret_cast<void*>(next.fetch_add(0x10));
  return kSuccess;
}
Result cuStreamDestroy_v2(void*) { return kSuccess; }
Result cuStreamSynchronize(void*) { return kSuccess; }
Result cuStreamIsCapturing(void*, int* status) {
  *status = state().capturing.load();
  return kSuccess;
}
Result cuStreamBeginCapture_v2(void*, int) { return kNotSupported; }
Result cuStreamEndCapture(void*, void**) { return kNotSupported; }
Result cuGraphInstantiateWithFlags(void**, void*, unsigned long long) { return kNotSupported; }
Result cuGraphLaunch(void*, void*) { return kNotSupported; }
Result cuGraphDestroy(void*) { return kSuccess; }
Result cuGraphExecDestroy(void*) { return kSuccess; }
// No device memory: a test that needs some needs a GPU.
Result cuMemAlloc_v2(unsigned long long*, std::size_t) { return kNotSupported; }
Result cuMemFree_v2(unsigned long long) { return kSuccess; }
Result cuMemGetInfo_v2(std::size_t* free_bytes, std::size_t* total_bytes) {
  *free_bytes = *total_bytes = 0;
  return kSuccess;
}
Result cuMemcpyHtoD_v2(unsigned long long, const void*, std::size_t) { return kNotSupported; }
Result cuMemcpyDtoH_v2(void*, unsigned long long, std::size_t) { return kNotSupported; }
Result cuMemcpyDtoD_v2(unsigned long long, unsigned long long, std::size_t) {
  return kNotSupported;
}
Result cuMemcpyDtoDAsync_v2(unsigned long long, unsigned long long, std::size_t, void*) {
  return kNotSupported;
}
Result cuMemsetD8_v2(unsigned long long, unsigned char, std::size_t) { return kNotSupported; }
Result cuMemsetD8Async(unsigned long long, unsigned char, std::size_t, void*) {
  return kNotSupported;
}
Result cuEventCreate(void** event, unsigned) {
  static char events[1];
  *event = events;
  return kSuccess;
}
Result cuEventDestroy_v2(void*) { return kSuccess; }
Result cuEventRecord(void*, void*) { return kSuccess; }
Result cuEventSynchronize(void*) { return kSuccess; }
Result cuEventElapsedTime_v2(float* milliseconds, void*, void*) {
  *milliseconds = 0;
  return kSuccess;
}

// --- The CuTeDSL runtime's C API zerojit loads (src/languages/cutedsl/runtime.hpp) --------------

int CuteDSLRT_Module_Create_From_Bytes(void** module, const unsigned char* bytes, std::size_t size,
                                       const char**, std::size_t) {
  if (bytes == nullptr || size == 0) return kInvalidImage;
  auto made = std::make_unique<Module>();
  made->image.assign(reinterpret_cast<const char*>(bytes), size);
  *module = made.get();
  record("host_load", "\"bytes\":" + std::to_string(size));
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.modules.push_back(std::move(made));
  return kSuccess;
}
int CuteDSLRT_Module_Get_Function(void** function, void* module, const char* prefix) {
  auto* owner = static_cast<Module*>(module);
  if (owner->image.find(prefix) == std::string::npos) return kNotFound;  // no such export
  std::lock_guard lock(state().mutex);
  auto& slot = owner->functions[prefix];
  if (!slot) {
    slot = std::make_unique<Function>();
    slot->name = prefix;
  }
  *function = slot.get();
  return kSuccess;
}
// The exported entry's arguments: a pointer each, the last one its return code (set to 0).
// zerojit packs them into one buffer in order, so the event also holds each argument's offset
// from the first and the bytes from the first to the return code (hex): the tests read the
// structs the entry would read (the data pointers, dynamic extents and strides).
int CuteDSLRT_Function_Run(void* function, void** args, std::size_t count) {
  if (count == 0) return kInvalidValue;
  *static_cast<std::int32_t*>(args[count - 1]) = 0;
  if (counted()) return kSuccess;
  const auto* first = static_cast<const unsigned char*>(args[0]);
  std::string offsets;
  bool ascending = true;
  for (std::size_t i = 0; i < count; ++i) {
    const auto* at = static_cast<const unsigned char*>(args[i]);
    ascending = ascending && at >= first && at - first < 4096;
    if (ascending) offsets += (i ? "," : "") + std::to_string(at - first);
  }
  std::string memory;
  if (ascending) {
    const auto end = static_cast<const unsigned char*>(args[count - 1]) + sizeof(std::int32_t);
    memory = ",\"offsets\":[" + offsets + "],\"memory\":\"" +
             hex(first, static_cast<std::size_t>(end - first)) + "\"";
  }
  record("host_run", "\"function\":" + quoted(static_cast<Function*>(function)->name) +
                         ",\"arguments\":" + std::to_string(count) + memory);
  return kSuccess;
}
const char* CuteDSLRT_GetErrorName(int error) {
  const char* name = nullptr;
  cuGetErrorName(error, &name);
  return name;
}

}  // extern "C"

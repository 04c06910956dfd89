// The DeepSeek-V4 model and serving configuration that the DSv4 kernel gates read.
//
// A ModelConfig holds only the hf_config fields the attention-side kernels depend on; a
// ServingConfig holds the serving options that change which kernels compile (KV cache layout,
// indexer dtype, block size, target, decode context parallelism). Both load from and save to
// JSON: the model in Hugging Face config.json form, so a saved model loads back as a file.
//
// Every function that builds a config from outside input validates it and throws ConfigError
// naming the source (file, preset or option) and the field at fault. A config assembled by
// hand in code is checked with validate().
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace zerojit::dsv4 {

// Raised for any malformed or inconsistent configuration; the message names the field.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// --- Dtypes ----------------------------------------------------------------------------------
// Plain enums local to this module; the runtime maps them onto its own dtype type.

// The dtype of a floating-point tensor the kernels read (model weights, RoPE cache).
enum class FloatDtype { f32, bf16 };

// How the main-attention paged K cache stores a row (spec §0.4, §4, §7).
enum class KvCacheDtype {
  fp8_ds_mla,  // 448 E4M3 + 64 BF16 + 8 UE8M0 scale bytes per row (FlashMLA layout)
  bf16,        // plain BF16 rows (FlashInfer layout)
  fp8_e4m3,    // plain per-tensor-scaled E4M3 rows (FlashInfer layout)
};

// How the Lightning Indexer quantizes its query (spec §1).
enum class IndexerDtype { fp8, mxfp4 };

// Canonical names, as the JSON form and the command line spell them.
std::string_view to_string(FloatDtype dtype);    // "float32" | "bfloat16" (torch names)
std::string_view to_string(KvCacheDtype dtype);  // "fp8_ds_mla" | "bf16" | "fp8_e4m3"
std::string_view to_string(IndexerDtype dtype);  // "fp8" | "mxfp4"

// Parsers; an unknown name throws ConfigError listing the accepted names.
// kv cache: "fp8_ds_mla"; "bf16" or "auto" (the model dtype, BF16); "fp8" or "fp8_e4m3".
KvCacheDtype parse_kv_cache_dtype(std::string_view text);
// indexer: "fp8" | "mxfp4".
IndexerDtype parse_indexer_dtype(std::string_view text);
// model dtype: "bfloat16" | "float32" (the torch_dtype / dtype of a config.json).
FloatDtype parse_model_dtype(std::string_view text);

// --- fp8_ds_mla page geometry (spec §0.4) --------------------------------------------------

inline constexpr std::int64_t kDsMlaTokenDataBytes = 576;  // 448 E4M3 + 64 BF16
inline constexpr std::int64_t kDsMlaScaleBytes = 8;        // 7 UE8M0 + 1 pad
inline constexpr std::int64_t kDsMlaRowBytes = kDsMlaTokenDataBytes + kDsMlaScaleBytes;  // 584
inline constexpr std::int64_t kDsMlaPageAlignment = 576;  // vLLM's cache_alignment
// The dequant-gather kernel copies pages with 32-byte cp.async, so a page stride must keep
// every page 32-byte aligned (spec §2).
inline constexpr std::int64_t kDsMlaPageStrideGranule = 32;

// The compress ratios a DSv4 layer can have: 0 = sliding window only, 4 = CSA (compressed
// sparse attention, owns the Lightning Indexer), 128 = HCA (heavily compressed attention).
inline constexpr int kSlidingWindowOnlyRatio = 0;
inline constexpr int kCsaCompressRatio = 4;
inline constexpr int kHcaCompressRatio = 128;

// Rows per page of a compressed cache: max(1, block_size / compress_ratio) (spec §0.4).
// Throws std::invalid_argument unless compress_ratio > 0 and block_size >= 0.
int compressed_block_size(int block_size, int compress_ratio);

// round_up(rows_per_page * 584, 576): vLLM's default fp8_ds_mla page stride (spec §0.4).
// Throws std::invalid_argument unless rows_per_page >= 1.
std::int64_t default_ds_mla_page_stride_bytes(int rows_per_page);

// --- Model -----------------------------------------------------------------------------------

// The DeepSeek-V4 hf_config fields the attention-side kernels depend on. Field names follow
// the Hugging Face config.json; defaults are the DeepseekV4Config class defaults, which a
// config.json that omits a field gets.
struct ModelConfig {
  std::string name;  // preset name, or the path a config was loaded from
  int num_hidden_layers = 0;
  // Multi-token-prediction layers after the decoder layers. Their attention runs the same
  // kernels during speculative decoding, so their compress ratios count in the gates.
  int num_nextn_predict_layers = 1;
  int head_dim = 512;          // main attention head: 448 nope + 64 rope
  int qk_rope_head_dim = 64;   // rotated tail of a head (main attention and indexer)
  int index_n_heads = 64;      // Lightning Indexer query heads
  int index_head_dim = 128;    // Lightning Indexer head
  int index_topk = 512;        // compressed rows the indexer selects (512 Flash, 1024 Pro)
  int sliding_window = 128;    // raw window every layer keeps
  double rms_norm_eps = 1e-6;  // compressor RMSNorm epsilon
  double compress_rope_theta = 160000.0;
  std::int64_t max_position_embeddings = 1048576;
  // One entry per decoder layer (num_hidden_layers entries), each 0, 4 or 128.
  std::vector<int> compress_ratios;
  // One entry per MTP layer (num_nextn_predict_layers entries), each 0, 4 or 128. A
  // config.json lists them after the decoder layers; a file that lists only the decoder
  // layers gives them ratio 0, as vLLM does.
  std::vector<int> mtp_compress_ratios;
  FloatDtype dtype = FloatDtype::bf16;  // torch_dtype: the dtype of the RMSNorm weights

  bool operator==(const ModelConfig&) const = default;
};

// DeepSeek-V4-Flash: 43 layers; compress_ratios = [0, 0, then 4, 128 alternating, ending
// with 4] (layers 2..42: even 4, odd 128), one MTP layer with ratio 0; index_topk 512.
ModelConfig dsv4_flash();
// DeepSeek-V4-Pro: 61 layers; compress_ratios = [128, 128, then 4, 128 alternating, ending
// with 4] (layers 2..60: even 4, odd 128), one MTP layer with ratio 0; index_topk 1024.
ModelConfig dsv4_pro();

// True when some decoder or MTP layer has this compress ratio.
bool has_compress_ratio(const ModelConfig& model, int compress_ratio);

// Throws ConfigError naming model.name and the field when a value is out of range.
void validate(const ModelConfig& model);

// Reads a Hugging Face style config document (the top level or its "text_config" object).
// Accepts compress_ratios with num_hidden_layers or num_hidden_layers +
// num_nextn_predict_layers entries, or the upstream transformers form (layer_types +
// compress_rates). `source` names the document in errors and becomes the model's name unless
// the document has a string "name". The result is validated.
ModelConfig model_config_from_json(const nlohmann::json& document, std::string_view source);

// Loads and validates a config.json file; errors name the file and the field.
ModelConfig load_model_config(const std::filesystem::path& config_file);

// "dsv4-flash" | "dsv4-pro" | a config.json path | a directory holding config.json.
ModelConfig model_from_name_or_path(std::string_view name_or_path);

// --- Serving ---------------------------------------------------------------------------------

struct ServingConfig {
  // Tokens per page of the sliding-window KV cache; 0 means no KV cache, so no kernel runs.
  int block_size = 256;
  KvCacheDtype kv_cache_dtype = KvCacheDtype::fp8_ds_mla;
  IndexerDtype indexer_dtype = IndexerDtype::fp8;
  std::int64_t max_num_batched_tokens = 8192;  // bound on the tokens of one forward pass
  std::string target_arch = "sm_90a";          // sm_<version>[a|f], e.g. sm_90a, sm_100a
  int dcp_world_size = 1;                      // decode context parallel ranks
  int cp_interleave = 1;                       // cp_kv_cache_interleave_size
  // Page stride in bytes of the compressed C128 fp8_ds_mla cache when the allocator packs
  // pages more widely than the default round_up(B_k * 584, 576) (e.g. 39168). Must be at
  // least B_k * 584 and a multiple of 32. B_k = compressed_block_size(block_size, 128).
  std::optional<std::int64_t> c128_page_stride_bytes;

  bool operator==(const ServingConfig&) const = default;
};

// The option names set_serving_option accepts (the fields above), in declaration order.
std::span<const std::string_view> serving_option_names();

// Sets one option from its text form, as a command line gives it ("block_size", "256").
// Dashes in the name count as underscores. c128_page_stride_bytes also takes "auto" (the
// default). Checks the value's form only; call validate() once all options are set.
void set_serving_option(ServingConfig& serving, std::string_view option, std::string_view value);

// The compute capability of a target: "sm_90a" -> 90, "sm_100f" -> 100. Throws ConfigError
// naming target_arch unless the text is sm_<2 or 3 digits> with an optional 'a' or 'f'.
int target_sm_version(std::string_view target_arch);

// The C128 ds_mla page stride the runtime uses: the explicit one, else the default for
// B_k = compressed_block_size(block_size, 128). Requires block_size >= 0.
std::int64_t effective_c128_page_stride_bytes(const ServingConfig& serving);

// Throws ConfigError naming the option: block_size >= 0, max_num_batched_tokens >= 1,
// dcp_world_size >= 1, cp_interleave >= 1, a well-formed target_arch, MXFP4 indexer only on
// an sm_100-family target (sm_100..sm_109: its FP4 MQA logits consumer needs SM100), and a
// page stride override >= B_k * 584 and a multiple of 32.
void validate(const ServingConfig& serving);

// --- Both ------------------------------------------------------------------------------------

struct Dsv4Config {
  ModelConfig model;
  ServingConfig serving;

  bool operator==(const Dsv4Config&) const = default;
};

// DSv4-Flash with the serving defaults (spec §11): block 256, fp8_ds_mla, FP8 indexer,
// 8192 batched tokens, sm_90a, no DCP, default page stride.
Dsv4Config default_config();

void validate(const Dsv4Config& config);

// --- JSON ------------------------------------------------------------------------------------
// nlohmann::json conversions (found by argument-dependent lookup: `json j = config;`,
// `j.get<Dsv4Config>()`). from_json validates and throws ConfigError.
//
// ModelConfig is written in config.json form: "name", the hf fields above, "compress_ratios"
// with the decoder then the MTP entries, "torch_dtype". ServingConfig is written with its
// field names, dtypes as their canonical names and c128_page_stride_bytes as null when unset;
// reading it, a missing key keeps its default and an unknown key is an error. Dsv4Config is
// {"model": ..., "serving": ...}.
void to_json(nlohmann::json& out, const ModelConfig& model);
void from_json(const nlohmann::json& in, ModelConfig& model);
void to_json(nlohmann::json& out, const ServingConfig& serving);
void from_json(const nlohmann::json& in, ServingConfig& serving);
void to_json(nlohmann::json& out, const Dsv4Config& config);
void from_json(const nlohmann::json& in, Dsv4Config& config);

}  // namespace zerojit::dsv4

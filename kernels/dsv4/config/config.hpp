// The DeepSeek-V4 model and serving configuration that the DSv4 kernel gates read.
//
// A ModelConfig (model.hpp) holds only the hf_config fields the attention-side kernels depend
// on; a ServingConfig (serving.hpp) holds the serving options that change which kernels
// compile (KV cache layout, indexer dtype, block size, target, decode context parallelism).
// Both load from and save to JSON (json.hpp): the model in Hugging Face config.json form
// (hf_json.hpp), so a saved model loads back as a file. presets.hpp has the published models.
//
// Every function that builds a config from outside input validates it and throws ConfigError
// naming the source (file, preset or option) and the field at fault. A config assembled by
// hand in code is checked with validate().
#pragma once

#include "dsv4/config/dsv4_config.hpp"
#include "dsv4/config/dtypes.hpp"
#include "dsv4/config/error.hpp"
#include "dsv4/config/geometry.hpp"
#include "dsv4/config/hf_json.hpp"
#include "dsv4/config/json.hpp"
#include "dsv4/config/model.hpp"
#include "dsv4/config/presets.hpp"
#include "dsv4/config/serving.hpp"

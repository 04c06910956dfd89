// Hostile input to the DSv4 configuration: text that is not UTF-8, nesting deep enough to
// exhaust a recursive reader, numbers no type holds, and values too long to quote. Each must
// be a ConfigError that names the file and the field, whose message is itself printable as
// JSON (the tool's --json output once aborted on one that was not) and short.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "unit/dsv4_config_support.hpp"

namespace zerojit::dsv4 {
namespace {

using namespace zerojit::dsv4::config_testing;
using nlohmann::json;

// A minimal valid document with `extra` spliced in as further members.
std::string document_with(const std::string& extra) {
  return R"({"num_hidden_layers": 1, "compress_ratios": [0])" +
         (extra.empty() ? std::string() : ", " + extra) + "}";
}

// Expects model_config_from_text to refuse `text` with a printable, bounded message holding
// every fragment; returns the message.
std::string refused(const std::string& text, std::initializer_list<std::string> fragments) {
  try {
    model_config_from_text(text, "doc.json");
  } catch (const ConfigError& error) {
    const std::string message = error.what();
    EXPECT_TRUE(prints_as_json(message)) << message;
    EXPECT_LT(message.size(), 600u) << message;
    EXPECT_NE(message.find("'doc.json'"), std::string::npos) << message;
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message lacks '" << fragment << "': " << message;
    }
    return message;
  }
  ADD_FAILURE() << "expected a ConfigError for " << text.substr(0, 200);
  return {};
}

TEST(Dsv4ConfigBadInput, TextThatIsNotUtf8NamesTheByte) {
  // The reproduction: {"head_dim": 512, "x": "\xe9"} (and a model around it).
  refused(R"({"head_dim": 512, "x": ")" + std::string("\xe9") + "\"}",
          {"not UTF-8", "offset 24", "line 1, column 25", "0xE9", "re-save it as UTF-8"});
  // Every malformed form: a lone continuation byte, an overlong '/', a surrogate, a code point
  // past U+10FFFF, a sequence cut short by the end of the text, bytes never in UTF-8.
  for (const std::string bad :
       {"\x80", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\xff", "\xfe"}) {
    SCOPED_TRACE(::testing::PrintToString(std::vector<unsigned char>(bad.begin(), bad.end())));
    refused(document_with(R"("x": ")" + bad + "\""), {"not UTF-8", "offset 55"});
  }
  // Well-formed text in any script is fine, in an unread field and in the name.
  const ModelConfig model =
      model_config_from_text(document_with(R"("x": "é € 😀", "name": "モデル")"), "doc.json");
  EXPECT_EQ(model.name, "モデル");
}

TEST(Dsv4ConfigBadInput, DeepNestingIsRefusedQuickly) {
  const auto start = std::chrono::steady_clock::now();
  // The reproduction: a value 100,000 arrays deep, which once overflowed the stack.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  refused(R"({"head_dim": )" + deep + "}", {"'head_dim[0][0]", "deeper than 64"});
  refused(document_with(R"("head_dim": )" + deep), {"'head_dim", "deeper than 64"});
  refused(document_with(R"("a": {"b": )" + deep + "}"), {"'a.b[0]", "deeper than 64"});
  // 64 levels (the document's own object counts) are fine; 65 are not.
  const auto nested = [](int levels) {
    return std::string(static_cast<std::size_t>(levels), '[') +
           std::string(static_cast<std::size_t>(levels), ']');
  };
  EXPECT_NO_THROW(model_config_from_text(document_with(R"("x": )" + nested(63)), "doc.json"));
  refused(document_with(R"("x": )" + nested(64)), {"'x[0]", "deeper than 64"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

TEST(Dsv4ConfigBadInput, DeepValuesBuiltInCodeAreDescribedWithoutRecursion) {
  // A document that never went through the reader (built in code, as the Python binding does)
  // may nest without bound: messages count a container's entries instead of printing it.
  json deep = json::array();
  for (int level = 0; level < 100000; ++level) {
    json outer = json::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  json document = json::parse(document_with(""));
  document["head_dim"] = std::move(deep);
  expect_config_error([&document] { model_config_from_json(document, "doc"); },
                      {"'head_dim'", "must be an integer", "array of 1 entries"});
  document["head_dim"] = json::object({{"a", 1}, {"b", 2}});
  expect_config_error([&document] { model_config_from_json(document, "doc"); },
                      {"'head_dim'", "object of 2 keys"});
}

TEST(Dsv4ConfigBadInput, NumbersNoTypeHoldsNameTheField) {
  // Past a double: once an uncaught nlohmann out_of_range (the tool's exit 5).
  refused(document_with(R"("head_dim": 1e400)"), {"'head_dim'", "out of range", "1e400"});
  refused(document_with(R"("rms_norm_eps": -1e400)"), {"'rms_norm_eps'", "-1e400"});
  refused(R"({"num_hidden_layers": 2, "compress_ratios": [0, 1e999]})",
          {"'compress_ratios[1]'", "1e999"});
  refused(document_with(R"("text_config": {"head_dim": 2e308})"), {"'text_config.head_dim'"});
  refused(document_with(R"("vocab_size": 1e400)"), {"'vocab_size'", "out of range"});
  // Past an int64 (the JSON reader makes it a double) and past an int.
  refused(document_with(R"("head_dim": 99999999999999999999)"),
          {"'head_dim'", "out of range", "1e+20", "32-bit integer"});
  refused(document_with(R"("max_position_embeddings": 99999999999999999999)"),
          {"'max_position_embeddings'", "out of range", "64-bit integer"});
  refused(document_with(R"("max_position_embeddings": 9223372036854775808)"),
          {"'max_position_embeddings'", "out of range", "9223372036854775807"});
  refused(document_with(R"("index_topk": 2147483648)"),
          {"'index_topk'", "out of range", "2147483647"});
  refused(document_with(R"("index_topk": -2147483649)"),
          {"'index_topk'", "out of range", "-2147483648"});
  refused(R"({"num_hidden_layers": 2, "compress_ratios": [0, -9223372036854775809]})",
          {"'compress_ratios[1]'", "out of range"});
  // A whole number within range written as a double is still not an integer.
  refused(document_with(R"("head_dim": 512.0)"), {"'head_dim'", "must be an integer"});
}

TEST(Dsv4ConfigBadInput, SyntaxErrorsSayWhere) {
  refused(R"({"num_hidden_layers": 1, "compress_ratios": [0])",
          {"invalid JSON", "line 1, column 48", "after field 'compress_ratios'",
           "unexpected end of input"});
  refused("{\n  \"num_hidden_layers\": 1,\n  \"compress_ratios\": [0 4]\n}",
          {"invalid JSON", "line 3, column 25", "in field 'compress_ratios[1]'"});
  refused("", {"invalid JSON", "line 1, column 1"});
  refused("[1, 2]", {"expected a JSON object", "array of 2 entries"});
  // An unterminated string as long as the file: the parser's "last read" is cut short.
  refused(R"({"x": ")" + std::string(100000, 'a'), {"invalid JSON", "..."});
}

TEST(Dsv4ConfigBadInput, LongOrOddValuesAreQuotedAsShortExcerpts) {
  const std::string long_name(100000, 'q');
  const std::string message =
      refused(document_with(R"("torch_dtype": ")" + long_name + "\""), {"'torch_dtype'", "..."});
  EXPECT_EQ(message.find(std::string(200, 'q')), std::string::npos);
  refused(
      R"({"num_hidden_layers": 1, "layer_types": [")" + long_name + R"("], "compress_rates": {}})",
      {"'layer_types[0]'", "..."});
  // Control characters are escaped, not printed.
  refused(R"({"num_hidden_layers": 1, "layer_types": ["a\nb"], "compress_rates": {}})",
          {"'layer_types[0]'", "'a\\nb'"});
  refused(R"({"num_hidden_layers": 1, "layer_types": ["a\u0001b"], "compress_rates": {}})",
          {"'layer_types[0]'", "'a\\x01b'"});
  refused(document_with(R"("head_dim": ")" + long_name + "\""), {"'head_dim'", "string \"qqq"});
}

TEST(Dsv4ConfigBadInput, OversizedTextIsRefusedByItsSize) {
  std::string text = document_with(R"("x": ")" + std::string(kMaxConfigJsonBytes, ' ') + "\"");
  refused(text, {"bytes, more than the", std::to_string(kMaxConfigJsonBytes)});
}

TEST(Dsv4ConfigBadInput, PathsThatAreNotUtf8AreShownEscaped) {
  const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
  const std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("zerojit-config-\xff-" + std::to_string(stamp));
  std::filesystem::create_directories(directory);
  {
    std::ofstream(directory / "config.json") << document_with("");
    std::ofstream(directory / "bad.json") << document_with(R"("head_dim": -5)");
  }
  const ModelConfig model = model_from_name_or_path((directory).string());
  // The model is named after its path, escaped: the name goes into --json output.
  EXPECT_NE(model.name.find("zerojit-config-\\xFF-"), std::string::npos) << model.name;
  EXPECT_TRUE(prints_as_json(model.name));
  EXPECT_TRUE(prints_as_json(json(model).dump()));
  try {
    load_model_config(directory / "bad.json");
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& error) {
    EXPECT_TRUE(prints_as_json(error.what())) << error.what();
    EXPECT_NE(std::string(error.what()).find("\\xFF"), std::string::npos) << error.what();
  }
  expect_config_error([] { model_from_name_or_path("no-such-\xff-model"); },
                      {"unknown DSv4 model", "'no-such-\\xFF-model'"});
  std::filesystem::remove_all(directory);
}

}  // namespace
}  // namespace zerojit::dsv4

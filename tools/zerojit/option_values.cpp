#include "option_values.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>

#include "zerojit/bytes.hpp"
#include "zerojit/compiler.hpp"
#include "zerojit/error.hpp"

namespace zerojit::tool {
namespace {

std::string range_text(std::int64_t minimum, std::int64_t maximum) {
  const auto signed_text = [](std::int64_t v) {
    return v < 0 ? "-" + number_text(static_cast<std::uint64_t>(-(v + 1)) + 1)
                 : number_text(static_cast<std::uint64_t>(v));
  };
  return "a whole number from " + signed_text(minimum) + " to " + signed_text(maximum);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string& program_name_storage() {
  static std::string name = "zerojit";
  return name;
}

}  // namespace

std::string shown(std::string_view text) {
  constexpr std::size_t kLongest = 60;
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < kLongest; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kLongest) out += "...";
  return out + "\"";
}

void set_program_name(std::string name) { program_name_storage() = std::move(name); }
const std::string& program_name() { return program_name_storage(); }

void refuse_option_as_value(std::string_view command, const std::string& option,
                            const std::string& value) {
  if (value.size() > 2 && value.starts_with("--")) {
    throw option_error(command, option + " needs a value, not the option " + shown(value),
                       "give " + option + " its value before the next option");
  }
}

std::string docs_page(std::string_view page) {
  return (program_name() == "zerojit" ? "docs/" : "zerojit's docs/") + std::string(page);
}

std::string see_help(std::string_view command) {
  return "see `" + program_name() + (command.empty() ? std::string() : " " + std::string(command)) +
         " --help`";
}

ToolError option_error(std::string_view command, std::string message, std::string_view hint) {
  std::string what_to_do(hint);
  if (what_to_do.empty()) {
    what_to_do = see_help(command);
  } else if (what_to_do.back() == '?') {  // "did you mean --jobs? See `zerojit warmup --help`"
    what_to_do += " S" + see_help(command).substr(1);
  } else {
    what_to_do += "; " + see_help(command);
  }
  return ToolError{kExitUsage, std::move(message), std::move(what_to_do)};
}

std::optional<std::int64_t> parse_whole_number(std::string_view text, std::int64_t minimum,
                                               std::int64_t maximum) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  const bool negative = text[0] == '-';
  if (negative && minimum >= 0) return std::nullopt;
  const std::string_view digits = negative ? text.substr(1) : text;
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  if (value < minimum || value > maximum) return std::nullopt;
  return value;
}

std::optional<std::uint64_t> parse_unsigned_number(std::string_view text, std::uint64_t maximum) {
  if (text.empty() || text.size() > 20 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || value > maximum) {
    return std::nullopt;
  }
  return value;
}

std::string number_text(std::uint64_t value) {
  const std::string digits = std::to_string(value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

namespace {

// A whole-number option stored into `target` (std::int64_t or int, whose range the bounds keep).
template <class Integer>
CLI::Option* add_bounded_integer(CLI::App& app, std::string_view command, const std::string& name,
                                 Integer& target, std::int64_t minimum, std::int64_t maximum,
                                 const std::string& help) {
  const std::string where(command);
  return app
      .add_option_function<std::string>(
          name,
          [&target, where, name, minimum, maximum](const std::string& text) {
            refuse_option_as_value(where, name, text);
            const auto value = parse_whole_number(text, minimum, maximum);
            if (!value) {
              throw option_error(
                  where, name + " takes " + range_text(minimum, maximum) + ", not " + shown(text));
            }
            target = static_cast<Integer>(*value);
          },
          help + " (" + range_text(minimum, maximum).substr(2) + ")")
      ->type_name("N");
}

}  // namespace

CLI::Option* add_whole_number_option(CLI::App& app, std::string_view command,
                                     const std::string& name, std::int64_t& target,
                                     std::int64_t minimum, std::int64_t maximum,
                                     const std::string& help) {
  return add_bounded_integer(app, command, name, target, minimum, maximum, help);
}

CLI::Option* add_whole_number_option(CLI::App& app, std::string_view command,
                                     const std::string& name, int& target, int minimum, int maximum,
                                     const std::string& help) {
  return add_bounded_integer(app, command, name, target, minimum, maximum, help);
}

CLI::Option* add_family_option(CLI::App& app, std::string_view command, const FamilyOption& option,
                               std::function<void(const std::string&)> store) {
  const std::string where(command);
  const std::int64_t minimum = option.minimum.value_or(std::numeric_limits<std::int64_t>::min());
  const std::int64_t maximum = option.maximum.value_or(std::numeric_limits<std::int64_t>::max());
  const bool whole = option.minimum.has_value() || option.maximum.has_value();
  std::string help = option.help;
  if (whole && !help.empty()) help += " (" + range_text(minimum, maximum).substr(2) + ")";
  CLI::Option* added = app.add_option_function<std::string>(
      option.flag,
      [where, option, minimum, maximum, whole, store = std::move(store)](const std::string& text) {
        refuse_option_as_value(where, option.flag, text);
        if (whole && !parse_whole_number(text, minimum, maximum)) {
          throw option_error(where, option.flag + " takes " + range_text(minimum, maximum) +
                                        ", not " + shown(text));
        }
        if (option.check) {
          const std::string problem = option.check(text);
          if (!problem.empty()) {
            throw option_error(where, option.flag + " " + shown(text) + ": " + problem);
          }
        }
        store(text);
      },
      help);
  added->type_name(whole ? "N" : option.value_name);
  added->group(option.hidden ? std::string() : option.group);
  return added;
}

CLI::Option* add_arch_option(CLI::App& app, std::string_view command,
                             std::optional<std::string>& target, const std::string& help) {
  const std::string where(command);
  return app
      .add_option_function<std::string>(
          "--arch",
          [&target, where](const std::string& arch) {
            refuse_option_as_value(where, "--arch", arch);
            // Named as the configuration field it sets (a family's target_arch).
            check_arch(where, "--arch", arch,
                       "an architecture such as sm_90a for the configuration's target_arch");
            target = arch;
          },
          help)
      ->type_name("ARCH");
}

CLI::Option* add_unsigned_option(CLI::App& app, std::string_view command, const std::string& name,
                                 std::uint64_t& target, const std::string& help) {
  const std::string where(command);
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  const std::string range = "a whole number from 0 to " + number_text(kMax);
  return app
      .add_option_function<std::string>(
          name,
          [&target, where, name, range](const std::string& text) {
            refuse_option_as_value(where, name, text);
            const auto value = parse_unsigned_number(text, kMax);
            if (!value)
              throw option_error(where, name + " takes " + range + ", not " + shown(text));
            target = *value;
          },
          help + " (" + range.substr(2) + ")")
      ->type_name("N");
}

CLI::Option* add_size_option(CLI::App& app, std::string_view command, const std::string& name,
                             std::optional<std::uint64_t>& target, const std::string& help) {
  const std::string where(command);
  return app
      .add_option_function<std::string>(
          name,
          [&target, where, name](const std::string& text) {
            refuse_option_as_value(where, name, text);
            std::string problem;
            const auto bytes = zerojit::parse_byte_size(text, &problem);
            if (!bytes) {
              throw option_error(where, name +
                                            " takes a size in bytes (digits, or a number with K, "
                                            "M, G, T, P or E: powers of 1024, e.g. 1073741824, "
                                            "512M, 1.5G), not " +
                                            shown(text) + ": " + problem);
            }
            target = *bytes;
          },
          help)
      ->type_name("SIZE");
}

CLI::Option* add_choice_option(CLI::App& app, std::string_view command, const std::string& name,
                               std::string& target, std::vector<std::string> choices,
                               const std::string& help) {
  const std::string where(command);
  std::string listed;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    listed += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  return app
      .add_option_function<std::string>(
          name,
          [&target, where, name, choices, listed](const std::string& text) {
            refuse_option_as_value(where, name, text);
            if (std::find(choices.begin(), choices.end(), text) == choices.end()) {
              const auto guess = nearest(text, choices);
              throw option_error(where, name + " takes " + listed + ", not " + shown(text),
                                 guess ? "did you mean " + name + " " + *guess + "?" : "");
            }
            target = text;
          },
          help)
      ->type_name(listed);
}

CLI::Option* add_text_option(CLI::App& app, std::string_view command, const std::string& name,
                             std::string& target, const std::string& type,
                             const std::string& help) {
  const std::string where(command);
  return app
      .add_option_function<std::string>(
          name,
          [&target, where, name, type](const std::string& text) {
            refuse_option_as_value(where, name, text);
            if (text.empty()) throw option_error(where, name + " needs a " + type + ", not \"\"");
            target = text;
          },
          help)
      ->type_name(type);
}

CLI::Option* add_text_list_option(CLI::App& app, std::string_view command, const std::string& name,
                                  std::vector<std::string>& target, const std::string& type,
                                  const std::string& help) {
  const std::string where(command);
  return app
      .add_option_function<std::vector<std::string>>(
          name,
          [&target, where, name, type](const std::vector<std::string>& texts) {
            for (const std::string& text : texts) {
              refuse_option_as_value(where, name, text);
              if (text.empty()) throw option_error(where, name + " needs a " + type + ", not \"\"");
            }
            target.insert(target.end(), texts.begin(), texts.end());
          },
          help)
      ->type_name(type);
}

std::vector<int> parse_devices(const std::string& text) {
  if (text.empty() || text == "all") return {};
  std::vector<int> devices;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const auto device = parse_whole_number(item, 0, 1023);
    if (!device) {
      throw ToolError{kExitUsage,
                      "--devices takes all, or device numbers from 0 to 1,023 separated by "
                      "commas, not " +
                          shown(text),
                      "pass --devices all, or device ordinals such as --devices 0 or "
                      "--devices 0,1"};
    }
    if (std::find(devices.begin(), devices.end(), *device) != devices.end()) {
      throw ToolError{kExitUsage, "--devices names device " + item + " twice",
                      "list each device once"};
    }
    devices.push_back(static_cast<int>(*device));
    start = comma + 1;
  }
  return devices;
}

CLI::Option* add_devices_option(CLI::App& app, std::string_view command, std::string& target,
                                const std::string& help) {
  const std::string where(command);
  return app
      .add_option_function<std::string>(
          "--devices",
          [&target, where](const std::string& text) {
            refuse_option_as_value(where, "--devices", text);
            try {
              parse_devices(text);
            } catch (const ToolError& error) {
              throw option_error(where, error.message, error.hint);
            }
            target = text;
          },
          help)
      ->type_name("all|LIST");
}

void check_arch(std::string_view command, const std::string& option, const std::string& arch,
                std::string_view what) {
  try {
    validate_arch(arch);
  } catch (const Error&) {
    throw option_error(command, option + " takes " + std::string(what) + ", not " + shown(arch),
                       "name one such as sm_90a (H100/H200) or sm_100a (B200)");
  }
}

std::optional<std::string> nearest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const std::string& candidate : candidates) {
    std::size_t distance = edit_distance(word, candidate);
    if (word.size() >= 3 && candidate.starts_with(word))
      distance = std::min<std::size_t>(distance, 1);
    const std::size_t allowed = word.size() <= 3 ? 1 : 2;
    if (distance <= allowed && (!best || distance < best_distance)) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace zerojit::tool

// A compile key whose fields are known only at run time (a Python kernel's frozen dataclass):
// an ordered list of named fields with typed values. Its text, JSON, template arguments and
// macros come from the same rendering functions a C++ key's do (key.hpp), so a dynamic key and
// a C++ key with the same fields and values print, render and therefore identify alike: a
// Python kernel and a C++ kernel of the same name, source, key and options compile to the same
// program identity and share disk-cache entries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "zerojit/dtype.hpp"
#include "zerojit/key.hpp"

namespace zerojit {

struct DynamicField {
  std::string name;
  // The types a C++ key field can have and a template argument can take; a string renders
  // verbatim (a type name, an enumerator), so a field can select e.g. "cuda::std::plus<>".
  std::variant<bool, std::int64_t, DType, std::string> value;
};

struct DynamicKey {
  std::vector<DynamicField> fields;

  // "dtype=f32, vector_width=4", as describe() prints a C++ key.
  std::string text() const {
    std::string out;
    for (const DynamicField& field : fields) {
      if (!out.empty()) out += ", ";
      out += field.name;
      out += '=';
      std::visit([&](const auto& value) { detail::append_value(out, value); }, field.value);
    }
    return out;
  }

  // {"dtype":"f32","vector_width":4}, as to_json_text() writes a C++ key.
  std::string json() const {
    std::string out = "{";
    for (const DynamicField& field : fields) {
      if (out.size() > 1) out += ',';
      detail::append_json_string(out, field.name);
      out += ':';
      std::visit([&](const auto& value) { detail::append_json_value(out, value); }, field.value);
    }
    out += '}';
    return out;
  }

  // "float, 4", as template_arguments() renders a C++ key.
  std::string template_arguments() const {
    std::string out;
    for (const DynamicField& field : fields) {
      if (!out.empty()) out += ", ";
      out += render(field);
    }
    return out;
  }

  // "-DZJ_DTYPE=float", ..., as macro_definitions() renders a C++ key.
  std::vector<std::string> macro_definitions(std::string_view prefix = "ZJ_") const {
    std::vector<std::string> out;
    for (const DynamicField& field : fields) {
      std::string option = "-D";
      option += prefix;
      for (char c : field.name) {
        option += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
      }
      option += '=';
      option += render(field);
      out.push_back(std::move(option));
    }
    return out;
  }

 private:
  static std::string render(const DynamicField& field) {
    return std::visit(
        [](const auto& value) -> std::string {
          using V = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<V, std::string>) {
            return value;
          } else {
            return render_template_value(value);
          }
        },
        field.value);
  }
};

}  // namespace zerojit

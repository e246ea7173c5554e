// Name mangling for protoc-gen-rdmarpc (see names.hpp).

#include "names.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <iterator>

namespace rdmarpc::codegen {
namespace {

constexpr std::string_view kCppKeywords[] = {
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "atomic_cancel",
    "atomic_commit",
    "atomic_noexcept",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char8_t",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "concept",
    "const",
    "consteval",
    "constexpr",
    "constinit",
    "const_cast",
    "continue",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "reflexpr",
    "register",
    "reinterpret_cast",
    "requires",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "synchronized",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
};

// Lower-case identifiers that the C or POSIX headers (or GNU mode) may define as macros.
constexpr std::string_view kMacroNames[] = {
    "assert", "errno", "i386",   "linux",   "major",  "minor",    "offsetof",
    "setjmp", "unix",  "va_arg", "va_copy", "va_end", "va_start",
};

// protobuf 3.21's cpp::ResolveKeyword list (C++11 keywords without char16_t/char32_t, plus NULL).
constexpr std::string_view kProtobufKeywords[] = {
    "NULL",          "alignas",      "alignof",   "and",        "and_eq",
    "asm",           "auto",         "bitand",    "bitor",      "bool",
    "break",         "case",         "catch",     "char",       "class",
    "compl",         "const",        "constexpr", "const_cast", "continue",
    "decltype",      "default",      "delete",    "do",         "double",
    "dynamic_cast",  "else",         "enum",      "explicit",   "export",
    "extern",        "false",        "float",     "for",        "friend",
    "goto",          "if",           "inline",    "int",        "long",
    "mutable",       "namespace",    "new",       "noexcept",   "not",
    "not_eq",        "nullptr",      "operator",  "or",         "or_eq",
    "private",       "protected",    "public",    "register",   "reinterpret_cast",
    "return",        "short",        "signed",    "sizeof",     "static",
    "static_assert", "static_cast",  "struct",    "switch",     "template",
    "this",          "thread_local", "throw",     "true",       "try",
    "typedef",       "typeid",       "typename",  "union",      "unsigned",
    "using",         "virtual",      "void",      "volatile",   "wchar_t",
    "while",         "xor",          "xor_eq",
};

std::string protobuf_resolve_keyword(std::string name) {
  if (std::find(std::begin(kProtobufKeywords), std::end(kProtobufKeywords), name) !=
      std::end(kProtobufKeywords)) {
    name.push_back('_');
  }
  return name;
}

bool is_upper(char c) noexcept {
  return std::isupper(static_cast<unsigned char>(c)) != 0;
}
bool is_lower_or_digit(char c) noexcept {
  return std::islower(static_cast<unsigned char>(c)) != 0 || std::isdigit(static_cast<unsigned char>(c)) != 0;
}

}  // namespace

std::string to_snake_case(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 4);
  auto push_underscore = [&out] {
    if (!out.empty() && out.back() != '_') out.push_back('_');
  };
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '_') {
      push_underscore();
      continue;
    }
    if (is_upper(c) && i > 0) {
      const char prev = name[i - 1];
      const bool next_lower =
          i + 1 < name.size() && std::islower(static_cast<unsigned char>(name[i + 1])) != 0;
      // A word starts at an upper-case letter after a lower-case letter or digit ("getUser"),
      // or at the last capital of an acronym that is followed by a lower-case letter ("HTTPServer").
      if (is_lower_or_digit(prev) || (is_upper(prev) && next_lower)) push_underscore();
    }
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

bool is_cpp_keyword(std::string_view name) noexcept {
  return std::find(std::begin(kCppKeywords), std::end(kCppKeywords), name) != std::end(kCppKeywords);
}

bool is_reserved_macro_name(std::string_view name) noexcept {
  return std::find(std::begin(kMacroNames), std::end(kMacroNames), name) != std::end(kMacroNames);
}

std::string escape_identifier(std::string_view name) {
  std::string out(name);
  if (is_cpp_keyword(name) || is_reserved_macro_name(name)) out.push_back('_');
  return out;
}

method_names make_method_names(std::string_view proto_method_name) {
  const std::string snake = to_snake_case(proto_method_name);
  method_names names;
  // Members of rdmarpc::service (and the base's injected class name) that a handler would hide.
  // ("dispatch" was one before new_call replaced it; still escaped so generated names stay stable.)
  constexpr std::array<std::string_view, 6> kServiceMembers = {"full_name",       "methods",  "new_call",
                                                               "new_stream_call", "dispatch", "service"};
  names.handler = escape_identifier(snake);
  if (std::find(kServiceMembers.begin(), kServiceMembers.end(), snake) != kServiceMembers.end()) {
    names.handler.push_back('_');
  }
  names.async_name = "async_" + snake;
  names.stream_name = escape_identifier(snake);
  names.do_name = "do_" + snake;
  names.descriptor = snake + "_method";
  return names;
}

std::string service_class_name(std::string_view proto_service_name) {
  std::string name = escape_identifier(proto_service_name);
  // A class cannot have a member with its own name, and these are nested in every service.
  if (name == "Interface" || name == "Stub" || name == "Service" || name == "CallbackService") {
    name.push_back('_');
  }
  return name;
}

std::string protobuf_class_name(std::string_view relative_name) {
  std::string out;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = relative_name.find('.', start);
    const std::string_view part =
        relative_name.substr(start, dot == std::string_view::npos ? dot : dot - start);
    // Like protobuf: the parent's (escaped) class name, "_", the nested name; then escape again.
    out = protobuf_resolve_keyword(out.empty() ? std::string(part) : out + "_" + std::string(part));
    if (dot == std::string_view::npos) return out;
    start = dot + 1;
  }
}

std::string protobuf_field_name(std::string_view proto_field_name) {
  std::string name(proto_field_name);
  for (char& c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return protobuf_resolve_keyword(std::move(name));
}

std::string protobuf_qualified_class_name(std::string_view package, std::string_view full_name) {
  std::string_view relative = full_name;
  if (!package.empty()) relative.remove_prefix(package.size() + 1);  // "a.b." of "a.b.Outer.Inner"
  std::string ns = cpp_namespace(package);
  return ns.empty() ? "::" + protobuf_class_name(relative) : "::" + ns + "::" + protobuf_class_name(relative);
}

std::string cpp_namespace(std::string_view package) {
  std::string out;
  for (char c : package) {
    if (c == '.') {
      out += "::";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string service_full_name(std::string_view package, std::string_view service) {
  std::string out;
  if (!package.empty()) {
    out.append(package);
    out.push_back('.');
  }
  out.append(service);
  return out;
}

std::string method_full_name(std::string_view package, std::string_view service, std::string_view method) {
  return "/" + service_full_name(package, service) + "/" + std::string(method);
}

std::string strip_proto_suffix(std::string_view file_name) {
  for (std::string_view suffix : {std::string_view(".protodevel"), std::string_view(".proto")}) {
    if (file_name.size() >= suffix.size() && file_name.substr(file_name.size() - suffix.size()) == suffix) {
      return std::string(file_name.substr(0, file_name.size() - suffix.size()));
    }
  }
  return std::string(file_name);
}

std::string cpp_string_literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (std::isprint(static_cast<unsigned char>(c)) != 0) {
      out.push_back(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      const auto u = static_cast<unsigned char>(c);
      out += "\\x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
      out += "\"\"";  // ends the hex escape so a following hex digit is not swallowed
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace rdmarpc::codegen

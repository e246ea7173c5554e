#pragma once
// Name mangling for protoc-gen-rdmarpc: proto identifiers to the C++ names the generated code uses.
// Layer: codegen (pure functions over strings, no protobuf types, unit-tested in tests/codegen).
// Threading: stateless.

#include <string>
#include <string_view>

namespace rdmarpc::codegen {

// "GetUserInfo" -> "get_user_info", "GetHTTPStatus" -> "get_http_status", "Get2Fa" -> "get2_fa".
// Runs of underscores collapse to one and leading underscores are dropped, so the result never
// contains "__" (reserved in C++) even after a prefix such as "async_" is added.
std::string to_snake_case(std::string_view name);

// True for every C++20 keyword and alternative token (class, co_await, and, ...).
bool is_cpp_keyword(std::string_view name) noexcept;

// True for lower-case names that standard headers may define as macros (assert, errno, major,
// minor, linux, unix, ...): a member function with such a name would not compile everywhere.
bool is_reserved_macro_name(std::string_view name) noexcept;

// `name` with a trailing underscore when it is a keyword or a reserved macro name.
std::string escape_identifier(std::string_view name);

// The C++ names generated for one rpc method. For rpc Delete: handler "delete_" (a keyword),
// async_name "async_delete", stream_name "delete_", do_name "do_delete", descriptor
// "delete_method". A unary method uses async_name on the client, a streaming one stream_name.
struct method_names {
  std::string handler;      // Service's pure virtual coroutine
  std::string async_name;   // Interface's completion-token front (unary)
  std::string stream_name;  // Interface's function opening a client_stream (streaming)
  std::string do_name;      // Interface's protected virtual, overridden by Stub and fakes
  std::string descriptor;   // the static constexpr method_descriptor
};
method_names make_method_names(std::string_view proto_method_name);

// `name` if `taken(name)` is false, else the first free of name_2, name_3, ... (no "__" even when
// name ends with '_'). How the plugin resolves two proto names mapping to one C++ name: the first
// declared keeps it, so adding a method never renames an existing one's functions.
template <typename Taken>
std::string first_free_name(const std::string& name, Taken&& taken) {
  if (!taken(name)) return name;
  const std::string stem = !name.empty() && name.back() == '_' ? name : name + "_";
  for (int n = 2;; ++n) {
    std::string candidate = stem + std::to_string(n);
    if (!taken(candidate)) return candidate;
  }
}

// A generated service class name: the proto name, escaped like any identifier, and with a
// trailing underscore when it equals one of its nested classes (Interface, Stub, Service).
std::string service_class_name(std::string_view proto_service_name);

// The C++ class protoc's C++ generator (libprotoc 3.21) emits for a message or enum, given its
// name relative to the package: "Outer.Inner" -> "Outer_Inner", "class" -> "class_",
// "class.new" -> "class__new". Mirrors protobuf's own rule (its keyword list is C++11's, which
// is why this is separate from escape_identifier); tests/codegen pins it against real protoc output.
std::string protobuf_class_name(std::string_view relative_name);

// The name protoc's C++ generator (libprotoc 3.21) gives a field's accessors (set_NAME, mutable_NAME):
// the proto name in lower case, with "_" appended to a C++ keyword ("Class" -> "class_").
std::string protobuf_field_name(std::string_view proto_field_name);

// "::a::b::Outer_Inner" for "a.b.Outer.Inner" in package "a.b"; "::Outer_Inner" without a package.
std::string protobuf_qualified_class_name(std::string_view package, std::string_view full_name);

// "a.b.c" -> "a::b::c"; "" -> "" (the global namespace).
std::string cpp_namespace(std::string_view package);

// "/a.b.Store/Get"; without a package "/Store/Get". The method id hashes this string.
std::string method_full_name(std::string_view package, std::string_view service, std::string_view method);

// "a.b.Store"; without a package "Store".
std::string service_full_name(std::string_view package, std::string_view service);

// "dir/foo.proto" -> "dir/foo" (protoc's own rule: strips ".proto" or ".protodevel").
std::string strip_proto_suffix(std::string_view file_name);

// A C++ string literal (with quotes) holding `text`.
std::string cpp_string_literal(std::string_view text);

}  // namespace rdmarpc::codegen

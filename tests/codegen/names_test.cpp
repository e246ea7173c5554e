// Unit tests of protoc-gen-rdmarpc's name mangling (codegen/names.hpp): pure string functions.

#include "names.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <string>

using namespace rdmarpc::codegen;

TEST_CASE("to_snake_case splits words at case changes, acronyms and digits") {
  CHECK(to_snake_case("Get") == "get");
  CHECK(to_snake_case("GetUserInfo") == "get_user_info");
  CHECK(to_snake_case("getUserInfo") == "get_user_info");
  CHECK(to_snake_case("GetHTTPStatus") == "get_http_status");
  CHECK(to_snake_case("HTTPServer") == "http_server");
  CHECK(to_snake_case("GetHTTP") == "get_http");
  CHECK(to_snake_case("Get2Fa") == "get2_fa");
  CHECK(to_snake_case("ABC") == "abc");
  CHECK(to_snake_case("already_snake") == "already_snake");
}

TEST_CASE("to_snake_case never produces a double or leading underscore") {
  CHECK(to_snake_case("Get_User") == "get_user");
  CHECK(to_snake_case("get__user") == "get_user");
  CHECK(to_snake_case("_Hidden") == "hidden");
  CHECK(to_snake_case("__x") == "x");
  CHECK(to_snake_case("Trailing_") == "trailing_");
}

TEST_CASE("escape_identifier appends an underscore to keywords and macro-like names only") {
  for (const char* keyword : {"class", "delete", "do", "new", "co_await", "requires", "and", "xor_eq",
                              "char8_t", "concept", "this", "operator"}) {
    INFO(keyword);
    CHECK(is_cpp_keyword(keyword));
    CHECK(escape_identifier(keyword) == std::string(keyword) + "_");
  }
  for (const char* macro : {"assert", "errno", "major", "minor", "linux", "unix"}) {
    INFO(macro);
    CHECK(is_reserved_macro_name(macro));
    CHECK(escape_identifier(macro) == std::string(macro) + "_");
  }
  for (const char* plain : {"get", "classy", "deleted", "Class", "NULL_", "newer", ""}) {
    INFO(plain);
    CHECK_FALSE(is_cpp_keyword(plain));
    CHECK(escape_identifier(plain) == plain);
  }
}

TEST_CASE("make_method_names follows docs/generated-api.md") {
  const method_names get = make_method_names("GetUserInfo");
  CHECK(get.handler == "get_user_info");
  CHECK(get.async_name == "async_get_user_info");
  CHECK(get.do_name == "do_get_user_info");
  CHECK(get.descriptor == "get_user_info_method");

  const method_names del = make_method_names("Delete");
  CHECK(del.handler == "delete_");
  CHECK(del.async_name == "async_delete");
  CHECK(del.do_name == "do_delete");
  CHECK(del.descriptor == "delete_method");
}

TEST_CASE("make_method_names escapes handlers that would hide rdmarpc::service members") {
  CHECK(make_method_names("Dispatch").handler == "dispatch_");
  CHECK(make_method_names("NewCall").handler == "new_call_");
  CHECK(make_method_names("Methods").handler == "methods_");
  CHECK(make_method_names("FullName").handler == "full_name_");
  CHECK(make_method_names("Service").handler == "service_");
  CHECK(make_method_names("NewStreamCall").handler == "new_stream_call_");
  CHECK(make_method_names("Dispatch").async_name == "async_dispatch");
  // Not members of the base: left alone.
  CHECK(make_method_names("Method").handler == "method");
  CHECK(make_method_names("Channel").handler == "channel");
}

TEST_CASE("stream_name is the escaped snake name") {
  CHECK(make_method_names("Watch").stream_name == "watch");
  CHECK(make_method_names("Delete").stream_name == "delete_");
  CHECK(make_method_names("Assert").stream_name == "assert_");
  CHECK(make_method_names("NewCall").stream_name == "new_call");  // not a member of the Interface
}

TEST_CASE("first_free_name keeps a free name and numbers a taken one") {
  const std::set<std::string> taken = {"watch", "watch_2", "get_", "x"};
  auto is_taken = [&](const std::string& name) { return taken.count(name) != 0; };
  CHECK(first_free_name("free", is_taken) == "free");
  CHECK(first_free_name("watch", is_taken) == "watch_3");
  CHECK(first_free_name("get_", is_taken) == "get_2");  // never "get__2"
  CHECK(first_free_name("x", is_taken) == "x_2");
}

TEST_CASE("service_class_name escapes keywords and the nested class names") {
  CHECK(service_class_name("Store") == "Store");
  CHECK(service_class_name("union") == "union_");
  CHECK(service_class_name("Service") == "Service_");
  CHECK(service_class_name("Stub") == "Stub_");
  CHECK(service_class_name("CallbackService") == "CallbackService_");
  CHECK(service_class_name("Interface") == "Interface_");
  CHECK(service_class_name("service") == "service");
}

TEST_CASE("protobuf_class_name mirrors protoc's C++ generator") {
  CHECK(protobuf_class_name("Foo") == "Foo");
  CHECK(protobuf_class_name("Outer.Inner") == "Outer_Inner");
  CHECK(protobuf_class_name("A.B.C") == "A_B_C");
  CHECK(protobuf_class_name("class") == "class_");
  CHECK(protobuf_class_name("class.new") == "class__new");
  CHECK(protobuf_class_name("NULL") == "NULL_");
  // protobuf 3.21 does not escape the C++20 keywords (its C++ output would not compile either).
  CHECK(protobuf_class_name("co_await") == "co_await");
  CHECK(protobuf_qualified_class_name("a.b", "a.b.Outer.Inner") == "::a::b::Outer_Inner");
  CHECK(protobuf_qualified_class_name("", "Outer.Inner") == "::Outer_Inner");
  CHECK(protobuf_qualified_class_name("google.protobuf", "google.protobuf.Empty") ==
        "::google::protobuf::Empty");
}

TEST_CASE("packages, full names and file names") {
  CHECK(cpp_namespace("a.b.c") == "a::b::c");
  CHECK(cpp_namespace("kv") == "kv");
  CHECK(cpp_namespace("").empty());
  CHECK(service_full_name("kv", "Store") == "kv.Store");
  CHECK(service_full_name("", "Store") == "Store");
  CHECK(method_full_name("a.b", "Store", "Get") == "/a.b.Store/Get");
  CHECK(method_full_name("", "Bare", "Hello") == "/Bare/Hello");
  CHECK(strip_proto_suffix("dir/foo.proto") == "dir/foo");
  CHECK(strip_proto_suffix("foo.protodevel") == "foo");
  CHECK(strip_proto_suffix("foo.txt") == "foo.txt");
}

TEST_CASE("cpp_string_literal escapes quotes, backslashes and control bytes") {
  CHECK(cpp_string_literal("/kv.Store/Get") == "\"/kv.Store/Get\"");
  CHECK(cpp_string_literal("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(cpp_string_literal(std::string("a\n1")) == "\"a\\x0a\"\"1\"");
}

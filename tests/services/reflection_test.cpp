// grpc.reflection.v1 over a real server: list_services, file_by_filename, file_containing_symbol
// (service, method, message), extensions, errors, several requests on one stream, and what the CLI
// does with the answer: rebuild a DescriptorPool from the returned files and find the method.
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/descriptor_database.h>
#include <google/protobuf/dynamic_message.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "rpc/status.hpp"
#include "services_fixture.hpp"

using namespace rdmarpc;
using namespace rdmarpc::test;
namespace reflection = grpc::reflection::v1;
namespace pb = google::protobuf;

namespace {

using reflection_stream =
    client_stream<reflection::ServerReflectionRequest, reflection::ServerReflectionResponse>;

reflection::ServerReflectionResponse ask(reflection_stream& stream,
                                         const reflection::ServerReflectionRequest& request) {
  REQUIRE(!write(stream, request));
  reflection::ServerReflectionResponse response;
  const auto ec = read(stream, response);
  INFO(ec.message());
  REQUIRE(!ec);
  return response;
}

reflection::ServerReflectionRequest list_services() {
  reflection::ServerReflectionRequest r;
  r.set_list_services("*");
  return r;
}
reflection::ServerReflectionRequest by_symbol(std::string symbol) {
  reflection::ServerReflectionRequest r;
  r.set_file_containing_symbol(std::move(symbol));
  return r;
}
reflection::ServerReflectionRequest by_filename(std::string name) {
  reflection::ServerReflectionRequest r;
  r.set_file_by_filename(std::move(name));
  return r;
}

// The names of the files in a file_descriptor_response, in order.
std::vector<std::string> file_names(const reflection::ServerReflectionResponse& response) {
  REQUIRE(response.has_file_descriptor_response());
  std::vector<std::string> names;
  for (const std::string& bytes : response.file_descriptor_response().file_descriptor_proto()) {
    pb::FileDescriptorProto file;
    REQUIRE(file.ParseFromString(bytes));
    names.push_back(file.name());
  }
  return names;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("reflection lists the services added to the server", "[services][reflection]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  INFO("target " << target);
  services_fixture f(target);
  reflection::ServerReflection::Stub stub(f.client());
  auto stream = stub.server_reflection_info();

  auto request = list_services();
  request.set_host("example");
  const auto response = ask(stream, request);
  CHECK(response.valid_host() == "example");
  CHECK(response.original_request().list_services() == "*");
  REQUIRE(response.has_list_services_response());
  std::vector<std::string> names;
  for (const auto& s : response.list_services_response().service()) names.push_back(s.name());
  CHECK(names == std::vector<std::string>{"svctest.Counter", "rdmarpc.test.Test", "grpc.health.v1.Health",
                                          "grpc.reflection.v1.ServerReflection"});
  CHECK(names == f.server().service_names());

  // The client ends its writes: the server ends the stream with OK.
  CHECK(!writes_done(stream));
  reflection::ServerReflectionResponse none;
  CHECK(is_end_of_stream(read(stream, none)));
  CHECK(!finish(stream));
}

TEST_CASE("reflection answers files by name and by symbol, with their imports", "[services][reflection]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  INFO("target " << target);
  services_fixture f(target);
  reflection::ServerReflection::Stub stub(f.client());
  auto stream = stub.server_reflection_info();

  // Several requests on one stream, answered in order.
  const auto by_file = file_names(ask(stream, by_filename("svctest/counter.proto")));
  REQUIRE(!by_file.empty());
  CHECK(by_file.front() == "svctest/counter.proto");            // the file asked for first
  CHECK(contains(by_file, "svctest/types.proto"));              // its import
  CHECK(contains(by_file, "google/protobuf/timestamp.proto"));  // and its import's
  CHECK(by_file.size() == 3);

  CHECK(file_names(ask(stream, by_symbol("svctest.Counter"))) == by_file);      // a service
  CHECK(file_names(ask(stream, by_symbol("svctest.Counter.Add"))) == by_file);  // a method
  CHECK(file_names(ask(stream, by_symbol("svctest.AddRequest"))) == by_file);   // a message

  const auto types = file_names(ask(stream, by_symbol("svctest.Item")));  // a message in the import
  CHECK(types == std::vector<std::string>{"svctest/types.proto", "google/protobuf/timestamp.proto"});

  // The built-in services describe themselves too.
  const auto health = file_names(ask(stream, by_symbol("grpc.health.v1.Health")));
  CHECK(health == std::vector<std::string>{"grpc/health/v1/health.proto"});
}

TEST_CASE("reflection answers NOT_FOUND for unknown files and symbols, and says why",
          "[services][reflection]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  INFO("target " << target);
  services_fixture f(target);
  reflection::ServerReflection::Stub stub(f.client());
  auto stream = stub.server_reflection_info();

  auto response = ask(stream, by_symbol("svctest.NoSuchThing"));
  REQUIRE(response.has_error_response());
  CHECK(response.error_response().error_code() == static_cast<int>(status_code::not_found));
  CHECK_THAT(response.error_response().error_message(), Catch::Contains("svctest.NoSuchThing"));
  CHECK(response.original_request().file_containing_symbol() == "svctest.NoSuchThing");

  response = ask(stream, by_filename("nope.proto"));
  REQUIRE(response.has_error_response());
  CHECK(response.error_response().error_code() == static_cast<int>(status_code::not_found));

  // A service the server has, but whose code has no descriptor (hand-written here; lite runtime
  // code is the same): NOT_FOUND, with a message telling the user what to do.
  for (const char* symbol : {"rdmarpc.test.Test", "rdmarpc.test.Test.Echo"}) {
    response = ask(stream, by_symbol(symbol));
    REQUIRE(response.has_error_response());
    CHECK(response.error_response().error_code() == static_cast<int>(status_code::not_found));
    CHECK_THAT(response.error_response().error_message(), Catch::Contains("no descriptor"));
    CHECK_THAT(response.error_response().error_message(), Catch::Contains("lite"));
  }

  // A request with nothing set.
  response = ask(stream, reflection::ServerReflectionRequest{});
  REQUIRE(response.has_error_response());
  CHECK(response.error_response().error_code() == static_cast<int>(status_code::invalid_argument));

  // The stream carries on after errors.
  CHECK(response.has_error_response());
  CHECK(ask(stream, list_services()).has_list_services_response());
}

TEST_CASE("reflection answers extension requests", "[services][reflection]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  INFO("target " << target);
  services_fixture f(target);
  reflection::ServerReflection::Stub stub(f.client());
  auto stream = stub.server_reflection_info();

  reflection::ServerReflectionRequest numbers;
  numbers.set_all_extension_numbers_of_type("svctest.Item");
  auto response = ask(stream, numbers);
  REQUIRE(response.has_all_extension_numbers_response());
  CHECK(response.all_extension_numbers_response().base_type_name() == "svctest.Item");
  std::vector<int> got(response.all_extension_numbers_response().extension_number().begin(),
                       response.all_extension_numbers_response().extension_number().end());
  std::sort(got.begin(), got.end());
  CHECK(got == std::vector<int>{100, 101});

  reflection::ServerReflectionRequest extension;
  extension.mutable_file_containing_extension()->set_containing_type("svctest.Item");
  extension.mutable_file_containing_extension()->set_extension_number(101);
  CHECK(file_names(ask(stream, extension)).front() == "svctest/types.proto");

  extension.mutable_file_containing_extension()->set_extension_number(150);
  response = ask(stream, extension);
  REQUIRE(response.has_error_response());
  CHECK(response.error_response().error_code() == static_cast<int>(status_code::not_found));

  numbers.set_all_extension_numbers_of_type("svctest.Nothing");
  response = ask(stream, numbers);
  REQUIRE(response.has_error_response());
  CHECK(response.error_response().error_code() == static_cast<int>(status_code::not_found));
}

TEST_CASE("a client rebuilds a DescriptorPool from reflection and finds the method",
          "[services][reflection]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  INFO("target " << target);
  services_fixture f(target);
  reflection::ServerReflection::Stub stub(f.client());
  auto stream = stub.server_reflection_info();

  // What the CLI does: list, then fetch each service's file, and build a pool of its own.
  pb::SimpleDescriptorDatabase database;
  const auto services = ask(stream, list_services());
  for (const auto& service : services.list_services_response().service()) {
    const auto response = ask(stream, by_symbol(service.name()));
    if (!response.has_file_descriptor_response()) continue;  // rdmarpc.test.Test has none
    for (const std::string& bytes : response.file_descriptor_response().file_descriptor_proto()) {
      pb::FileDescriptorProto file;
      REQUIRE(file.ParseFromString(bytes));
      pb::FileDescriptorProto known;
      if (!database.FindFileByName(file.name(), &known)) REQUIRE(database.Add(file));
    }
  }
  pb::DescriptorPool pool(&database);
  const pb::MethodDescriptor* add = pool.FindMethodByName("svctest.Counter.Add");
  REQUIRE(add != nullptr);
  CHECK(add->input_type()->full_name() == "svctest.AddRequest");
  CHECK(add->output_type()->full_name() == "svctest.Item");
  const pb::MethodDescriptor* follow = pool.FindMethodByName("svctest.Counter.Follow");
  REQUIRE(follow != nullptr);
  CHECK(follow->server_streaming());
  REQUIRE(pool.FindMethodByName("grpc.health.v1.Health.Watch") != nullptr);
  REQUIRE(pool.FindMethodByName("grpc.reflection.v1.ServerReflection.ServerReflectionInfo") != nullptr);
  CHECK(pool.FindMessageTypeByName("google.protobuf.Timestamp") != nullptr);  // a transitive import

  // A request built from the rebuilt descriptors only is what the server's generated code parses.
  pb::DynamicMessageFactory factory(&pool);
  std::unique_ptr<pb::Message> request(factory.GetPrototype(add->input_type())->New());
  request->GetReflection()->SetString(request.get(), add->input_type()->FindFieldByName("name"), "apples");
  request->GetReflection()->SetInt64(request.get(), add->input_type()->FindFieldByName("delta"), 3);
  svctest::AddRequest typed;
  REQUIRE(typed.ParseFromString(request->SerializeAsString()));
  CHECK(typed.name() == "apples");
  CHECK(typed.delta() == 3);
  // And the method answers over this server.
  svctest::Counter::Stub counter(f.client());
  waiter<boost::system::error_code, svctest::Item> w;
  counter.async_add(typed, w.handler());
  auto r = w.get();
  REQUIRE(r);
  CHECK(!std::get<0>(*r));
  CHECK(std::get<1>(*r).value() == 3);
}

TEST_CASE("reflection added without add_to cannot list services but answers the rest",
          "[services][reflection]") {
  services::reflection_service plain;  // never add_to(server): no server to list
  reflection::ServerReflectionResponse response;
  plain.answer(list_services(), response);
  REQUIRE(response.has_error_response());
  CHECK(response.error_response().error_code() == static_cast<int>(status_code::failed_precondition));
  CHECK_THAT(response.error_response().error_message(), Catch::Contains("add_to"));
  plain.answer(by_symbol("svctest.Counter"), response);
  CHECK(file_names(response).front() == "svctest/counter.proto");
}

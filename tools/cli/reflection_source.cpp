// The reflection descriptor source: a grpc.reflection.v1 ServerReflectionInfo stream, opened on first
// use and kept for every question; the files it returns are cached (the server may leave out files it
// sent before on the same stream) and feed a DescriptorPool through a DescriptorDatabase.

#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/descriptor_database.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>
#include <set>

#include "descriptor_source.hpp"
#include "generic_call.hpp"
#include "grpc/reflection/v1/reflection.pb.h"
#include "session.hpp"

namespace rdmarpc::cli {

namespace {

namespace gp = google::protobuf;
namespace asio = boost::asio;
using reflection_request = grpc::reflection::v1::ServerReflectionRequest;
using reflection_response = grpc::reflection::v1::ServerReflectionResponse;
constexpr std::string_view kReflectionMethod = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";

class reflection_source final : public descriptor_source, private gp::DescriptorDatabase {
 public:
  explicit reflection_source(session& s) : session_(s), pool_(this) {}

  ~reflection_source() override {
    if (stream_.io()) {
      // Half-close and let the server end the stream, so its log shows no cancelled call.
      try {
        session_.run(close_stream());
      } catch (...) {
      }
    }
  }

  std::vector<std::string> services() override {
    reflection_request request;
    request.set_list_services("");
    auto response = ask(request);
    if (!response) rethrow_failure();
    if (response->has_error_response()) {
      throw cli_error(kExitFailure, "the server's reflection could not list services: " +
                                        response->error_response().error_message());
    }
    std::vector<std::string> names;
    for (const auto& s : response->list_services_response().service()) names.push_back(s.name());
    std::sort(names.begin(), names.end());
    return names;
  }

  const gp::DescriptorPool& pool() override { return pool_; }

  void rethrow_failure() override {
    if (failure_) throw *failure_;
  }

 private:
  // DescriptorDatabase: asked by pool_ for what it does not know yet. A failed stream is
  // remembered (failure_) and reported as "not found"; exceptions must not cross protobuf.
  bool FindFileByName(const std::string& name, gp::FileDescriptorProto* output) override {
    if (cache_.FindFileByName(name, output)) return true;
    reflection_request request;
    request.set_file_by_filename(name);
    return fetch(request) && cache_.FindFileByName(name, output);
  }
  bool FindFileContainingSymbol(const std::string& symbol, gp::FileDescriptorProto* output) override {
    if (cache_.FindFileContainingSymbol(symbol, output)) return true;
    reflection_request request;
    request.set_file_containing_symbol(symbol);
    return fetch(request) && cache_.FindFileContainingSymbol(symbol, output);
  }
  bool FindFileContainingExtension(const std::string&, int, gp::FileDescriptorProto*) override {
    return false;
  }

  bool fetch(const reflection_request& request) {
    auto response = ask(request);
    if (!response || !response->has_file_descriptor_response()) return false;
    for (const auto& bytes : response->file_descriptor_response().file_descriptor_proto()) {
      gp::FileDescriptorProto file;
      if (!file.ParseFromString(bytes)) {
        failure_.emplace(kExitFailure, "the server's reflection sent a file descriptor that does not parse");
        return false;
      }
      if (known_files_.insert(file.name()).second)
        cache_.AddAndOwn(new gp::FileDescriptorProto(std::move(file)));
    }
    return true;
  }

  // One question and its answer; nullopt (and failure_ set) when the stream failed.
  std::optional<reflection_response> ask(const reflection_request& request) {
    if (failure_) return std::nullopt;
    if (!stream_.io()) {
      session_.prepare(context_);
      const method_descriptor md{kReflectionMethod, method_id(kReflectionMethod), rpc_kind::bidi_streaming};
      stream_ = generic_stream(session_.channel().start_stream(md, &context_, nullptr));
    }
    return session_.run(exchange(request));
  }

  asio::awaitable<std::optional<reflection_response>> exchange(const reflection_request& request) {
    constexpr auto token = asio::as_tuple(asio::use_awaitable);
    reflection_response response;
    auto [ec] = co_await stream_.async_write(request, token);
    if (!ec) std::tie(ec) = co_await stream_.async_read(response, token);
    if (!ec) co_return response;
    // The stream ended: its status says why.
    auto [status] = co_await stream_.async_finish(token);
    if (!status) status = ec == asio::error::eof ? make_error_code(status_code::internal) : ec;
    if (to_status_code(status) == status_code::unimplemented) {
      failure_.emplace(exit_status_for(status_code::unimplemented),
                       "the server at " + session_.opts().uri +
                           " has no reflection service (grpc.reflection.v1.ServerReflection: UNIMPLEMENTED); "
                           "give its .proto files with --proto FILE -I DIR");
    } else {
      failure_.emplace(
          session_.call_failed("reflection (grpc.reflection.v1.ServerReflection)", status, context_));
    }
    co_return std::nullopt;
  }

  asio::awaitable<int> close_stream() {
    constexpr auto token = asio::as_tuple(asio::use_awaitable);
    if (!failure_) {
      co_await stream_.async_writes_done(token);
      reflection_response ignored;
      auto [ec] = co_await stream_.async_read(ignored, token);
      (void)ec;
    }
    co_await stream_.async_finish(token);
    co_return 0;
  }

  session& session_;
  client_context context_;
  generic_stream stream_;  // after context_: destroyed first
  gp::SimpleDescriptorDatabase cache_;
  std::set<std::string> known_files_;
  std::optional<cli_error> failure_;
  gp::DescriptorPool pool_;
};

}  // namespace

std::unique_ptr<descriptor_source> make_reflection_source(session& s) {
  return std::make_unique<reflection_source>(s);
}

}  // namespace rdmarpc::cli

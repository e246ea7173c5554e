#pragma once
// fake_stream_io: an in-memory rdmarpc::stream_io for codegen tests. Reads come from a queue of
// serialized messages (then end of stream), writes are recorded; every operation completes through
// post on the given executor, never inside the call (a fake serving several executors would
// dispatch to the handler's associated one; these tests run one io_context).
// Layer: tests. Threading: one io_context thread.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rpc/status.hpp"
#include "rpc/stream.hpp"

namespace codegen_test {

class fake_stream_io final : public rdmarpc::stream_io {
 public:
  explicit fake_stream_io(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}

  template <typename Message>
  void push_inbound(const Message& m) {
    inbound.push_back(m.SerializeAsString());
  }

  std::deque<std::string> inbound;  // what read() returns, in order; then eof
  std::vector<std::string> written;
  boost::system::error_code finish_result;  // what finish() reports
  int writes_done_calls = 0;
  int finish_calls = 0;
  int cancel_calls = 0;

  void write(const google::protobuf::MessageLite& message, handler h) override {
    written.push_back(message.SerializeAsString());
    complete(std::move(h), {});
  }
  void read(google::protobuf::MessageLite& message, handler h) override {
    if (inbound.empty()) {
      complete(std::move(h), boost::asio::error::eof);
      return;
    }
    const bool ok = message.ParseFromString(inbound.front());
    inbound.pop_front();
    complete(std::move(h),
             ok ? boost::system::error_code{} : make_error_code(rdmarpc::status_code::internal));
  }
  void writes_done(handler h) override {
    ++writes_done_calls;
    complete(std::move(h), {});
  }
  void finish(handler h) override {
    ++finish_calls;
    complete(std::move(h), finish_result);
  }
  void cancel() noexcept override { ++cancel_calls; }

 private:
  void complete(handler h, boost::system::error_code ec) {
    rdmarpc::post_completion(std::move(h), ec, nullptr, ex_);
  }

  boost::asio::any_io_executor ex_;
};

}  // namespace codegen_test

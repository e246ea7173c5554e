#pragma once
// session: what every command that talks to a server holds: one io_context run by the calling
// thread, the channel to the URI, and a way to run a coroutine on it to completion. Also the person's
// words for a failed call. Layer: tools/cli. Threading: one thread (the io_context runs only
// inside run()).

#include <google/protobuf/message.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <exception>
#include <memory>
#include <optional>
#include <rdmarpc/channel.hpp>
#include <string>

#include "cli_error.hpp"
#include "options.hpp"

namespace rdmarpc::cli {

class session {
 public:
  // Throws cli_error(kExitUsage) for a URI the channel cannot parse.
  explicit session(const options& o);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  boost::asio::io_context& io() noexcept { return io_; }
  rdmarpc::channel& channel() noexcept { return *channel_; }
  const options& opts() const noexcept { return options_; }

  // A context with the command line's metadata and deadline (--timeout from now).
  void prepare(client_context& context) const;

  // Runs the io_context until `work` finished; returns its result or rethrows its exception.
  template <typename T>
  T run(boost::asio::awaitable<T> work) {
    std::optional<T> result;
    std::exception_ptr error;
    bool done = false;
    boost::asio::co_spawn(io_, std::move(work), [&](std::exception_ptr e, T value) {
      done = true;
      error = e;
      if (!e) result.emplace(std::move(value));
    });
    drive(done);
    if (error) std::rethrow_exception(error);
    return std::move(*result);
  }

  // "cannot reach tcp://...: ..." or "kv.Store/Get failed: NOT_FOUND: ..." as a cli_error whose
  // exit status is 64 + the call's status.
  cli_error call_failed(std::string_view what, const boost::system::error_code& ec,
                        const client_context& context) const;

 private:
  void drive(const bool& done);

  const options& options_;
  boost::asio::io_context io_;
  std::shared_ptr<rdmarpc::channel> channel_;
};

}  // namespace rdmarpc::cli

#include "session.hpp"

#include <boost/system/system_error.hpp>

namespace rdmarpc::cli {

session::session(const options& o) : options_(o) {
  try {
    channel_options channel;
    if (o.heartbeat_timeout) channel.heartbeat_timeout = *o.heartbeat_timeout;
    channel_ = rdmarpc::channel::create(io_.get_executor(), o.uri, channel);
  } catch (const boost::system::system_error& e) {
    throw cli_error(kExitUsage, "'" + o.uri + "' is not a server URI (" + e.code().message() +
                                    "): use tcp://HOST:PORT or rdma://HOST:PORT");
  }
}

session::~session() {
  channel_->close();
  // Let the channel's closing work (connection shutdown) run before the io_context goes.
  io_.poll();
}

void session::prepare(client_context& context) const {
  for (const auto& [key, value] : options_.metadata) context.add_metadata(key, value);
  if (options_.timeout) context.set_timeout(*options_.timeout);
}

void session::drive(const bool& done) {
  io_.restart();
  while (!done) {
    if (io_.run_one() == 0) throw cli_error(kExitFailure, "internal error: the call was lost (no work left)");
  }
}

cli_error session::call_failed(std::string_view what, const boost::system::error_code& ec,
                               const client_context& context) const {
  const status_code code = to_status_code(ec);
  std::string detail = context.status_message();
  if (detail.empty()) detail = ec.message();
  std::string text;
  if (code == status_code::unavailable) {
    text = "cannot reach " + options_.uri + " (" + std::string(what) + ": UNAVAILABLE: " + detail + ")";
  } else if (code == status_code::cancelled) {
    text = std::string(what) + ": CANCELLED (" + detail + ")";
  } else if (code == status_code::deadline_exceeded) {
    text = std::string(what) + ": DEADLINE_EXCEEDED: the deadline (--timeout) passed (" + detail + ")";
  } else {
    text = std::string(what) + " failed: " + std::string(to_string(code)) + ": " + detail;
  }
  return cli_error(exit_status_for(code), text);
}

}  // namespace rdmarpc::cli

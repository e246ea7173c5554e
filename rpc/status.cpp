#include "rpc/status.hpp"

#include <boost/asio/error.hpp>
#include <string>

#include "transport/error.hpp"

namespace rdmarpc {
namespace {

class category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "rdmarpc.status"; }
  std::string message(int value) const override {
    return std::string(to_string(static_cast<status_code>(value)));
  }
};

}  // namespace

const boost::system::error_category& status_category() noexcept {
  static const category instance;  // immutable
  return instance;
}

std::string_view to_string(status_code c) noexcept {
  switch (c) {
    case status_code::ok: return "OK";
    case status_code::cancelled: return "CANCELLED";
    case status_code::unknown: return "UNKNOWN";
    case status_code::invalid_argument: return "INVALID_ARGUMENT";
    case status_code::deadline_exceeded: return "DEADLINE_EXCEEDED";
    case status_code::not_found: return "NOT_FOUND";
    case status_code::already_exists: return "ALREADY_EXISTS";
    case status_code::permission_denied: return "PERMISSION_DENIED";
    case status_code::resource_exhausted: return "RESOURCE_EXHAUSTED";
    case status_code::failed_precondition: return "FAILED_PRECONDITION";
    case status_code::aborted: return "ABORTED";
    case status_code::out_of_range: return "OUT_OF_RANGE";
    case status_code::unimplemented: return "UNIMPLEMENTED";
    case status_code::internal: return "INTERNAL";
    case status_code::unavailable: return "UNAVAILABLE";
    case status_code::data_loss: return "DATA_LOSS";
    case status_code::unauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

status_code to_status_code(const boost::system::error_code& ec) noexcept {
  if (!ec) return status_code::ok;
  if (ec.category() == status_category()) {
    const int v = ec.value();
    return v >= 0 && v <= 16 ? static_cast<status_code>(v) : status_code::unknown;
  }
  if (ec == boost::asio::error::operation_aborted) return status_code::cancelled;
  if (ec == boost::asio::error::would_block) return status_code::resource_exhausted;  // no send room
  if (ec.category() == transport::transport_category()) {
    switch (static_cast<transport::errc>(ec.value())) {
      case transport::errc::message_too_large: return status_code::resource_exhausted;
      case transport::errc::bad_uri:
      case transport::errc::unsupported_scheme: return status_code::invalid_argument;
      case transport::errc::connect_timeout: return status_code::unavailable;
      case transport::errc::protocol_error: return status_code::internal;
      default:
        return status_code::unavailable;  // closed, lost, unreachable, rejected, device, not_connected,
                                          // registered_memory_exhausted, address_changed,
                                          // queue_pair_error, port_down
    }
  }
  return status_code::unavailable;  // system errors (sockets, verbs) mean the peer is not reachable
}

}  // namespace rdmarpc

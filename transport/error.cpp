#include "transport/error.hpp"

#include <string>

namespace rdmarpc::transport {
namespace {

class category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "rdmarpc.transport"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::closed_locally: return "connection closed locally";
      case errc::closed_by_peer: return "connection closed by peer";
      case errc::connection_lost: return "connection lost";
      case errc::message_too_large: return "message larger than the maximum message size";
      case errc::protocol_error: return "peer violated the transport protocol";
      case errc::handshake_rejected: return "connection handshake rejected";
      case errc::unreachable: return "peer unreachable";
      case errc::connect_timeout: return "connection setup timed out";
      case errc::rnr_retry_exceeded: return "receiver not ready (RNR) retries exceeded";
      case errc::device_error: return "RDMA device error";
      case errc::bad_uri: return "malformed URI (expected scheme://host:port)";
      case errc::unsupported_scheme: return "unsupported URI scheme";
      case errc::not_connected: return "not connected";
      case errc::registered_memory_exhausted:
        return "registered memory exhausted (the budget, or the system's locked-memory limit)";
      case errc::address_changed: return "local address moved to another RDMA port (ADDR_CHANGE)";
      case errc::queue_pair_error: return "the RDMA device reported the queue pair in error";
      case errc::port_down: return "the RDMA port went down (link lost)";
    }
    return "unknown transport error " + std::to_string(value);
  }
};

}  // namespace

const boost::system::error_category& transport_category() noexcept {
  static const category instance;  // immutable, like std::generic_category()
  return instance;
}

}  // namespace rdmarpc::transport

#include "verbs/error.hpp"

#include <string>

namespace rdmarpc::verbs {
namespace {

class wc_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "ibv_wc_status"; }
  std::string message(int value) const override {
    return ibv_wc_status_str(static_cast<ibv_wc_status>(value));
  }
};

class cm_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "rdma_cm_event"; }
  std::string message(int value) const override {
    return std::string("unexpected rdma_cm event ") + rdma_event_str(static_cast<rdma_cm_event_type>(value));
  }
};

}  // namespace

const boost::system::error_category& wc_status_category() noexcept {
  static const wc_category instance;  // immutable
  return instance;
}

const boost::system::error_category& cm_event_category() noexcept {
  static const cm_category instance;  // immutable
  return instance;
}

}  // namespace rdmarpc::verbs

#pragma once
// Interceptors for examples/tracing, written as an application would write its own:
//  - traceparent_propagation (client): every call carries a W3C `traceparent` header
//    ("00-<trace-id>-<span-id>-01"); a call made by a handler on behalf of its own call
//    (client_context::set_parent) continues that call's trace, any other starts a new one.
//  - request_log (server): one line per finished call with method, peer, status, time and trace.
//  - bearer_token (client) and bearer_check (server): an "authorization: Bearer <token>" header.
// Threading: the hooks run on many threads at once; the random generator is behind a mutex.

#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <random>
#include <rdmarpc/channel.hpp>
#include <rdmarpc/server.hpp>
#include <string>
#include <string_view>

namespace tracing {

struct traceparent {
  std::string trace_id;   // 32 hex digits
  std::string parent_id;  // 16 hex digits: the caller's span
};

inline bool is_hex(std::string_view s) {
  return s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// "00-<32 hex>-<16 hex>-<2 hex>" (W3C Trace Context, version 00); nullopt for anything else.
inline std::optional<traceparent> parse_traceparent(std::string_view v) {
  if (v.size() != 55 || v.substr(0, 3) != "00-" || v[35] != '-' || v[52] != '-') return std::nullopt;
  traceparent t{std::string(v.substr(3, 32)), std::string(v.substr(36, 16))};
  if (!is_hex(t.trace_id) || !is_hex(t.parent_id) || !is_hex(v.substr(53, 2))) return std::nullopt;
  if (t.trace_id == std::string(32, '0') || t.parent_id == std::string(16, '0')) return std::nullopt;
  return t;
}

inline std::optional<traceparent> traceparent_of(const rdmarpc::metadata& md) {
  for (const auto& [key, value] : md)
    if (key == "traceparent") return parse_traceparent(value);
  return std::nullopt;
}

class traceparent_propagation final : public rdmarpc::client_interceptor {
 public:
  rdmarpc::call_verdict on_call_start(const rdmarpc::client_call_info& call,
                                      rdmarpc::metadata& added) override {
    std::optional<traceparent> parent;
    if (call.context != nullptr && call.context->parent() != nullptr)
      parent = traceparent_of(call.context->parent()->client_metadata());
    const std::string trace_id = parent ? parent->trace_id : random_hex(32);
    added.emplace_back("traceparent", "00-" + trace_id + "-" + random_hex(16) + "-01");
    return {};
  }

 private:
  std::string random_hex(std::size_t digits) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out(digits, '0');
    std::lock_guard lock(mutex_);
    for (auto& c : out) c = kHex[random_() & 15];
    return out;
  }
  std::mutex mutex_;
  std::mt19937_64 random_{std::random_device{}()};
};

class request_log final : public rdmarpc::server_interceptor {
 public:
  explicit request_log(std::string server) : server_(std::move(server)) {}
  void on_call_end(const rdmarpc::call_info& call, const rdmarpc::call_outcome& outcome) override {
    const auto trace = traceparent_of(call.metadata);
    spdlog::info("{}: {} from {}: {} in {} us, trace {} parent {}", server_, call.method, call.peer.address,
                 rdmarpc::to_string(outcome.code),
                 std::chrono::duration_cast<std::chrono::microseconds>(outcome.elapsed).count(),
                 trace ? trace->trace_id : "-", trace ? trace->parent_id : "-");
  }

 private:
  std::string server_;
};

class bearer_token final : public rdmarpc::client_interceptor {
 public:
  explicit bearer_token(std::string token) : header_("Bearer " + std::move(token)) {}
  rdmarpc::call_verdict on_call_start(const rdmarpc::client_call_info&, rdmarpc::metadata& added) override {
    added.emplace_back("authorization", header_);
    return {};
  }

 private:
  std::string header_;
};

class bearer_check final : public rdmarpc::server_interceptor {
 public:
  explicit bearer_check(std::string token) : expected_("Bearer " + std::move(token)) {}
  rdmarpc::call_verdict on_call_start(const rdmarpc::call_info& call, rdmarpc::metadata&) override {
    for (const auto& [key, value] : call.metadata)
      if (key == "authorization")
        return value == expected_ ? rdmarpc::call_verdict{}
                                  : rdmarpc::call_verdict{rdmarpc::status_code::unauthenticated, "bad token"};
    return {rdmarpc::status_code::unauthenticated, "no authorization metadata"};
  }

 private:
  std::string expected_;
};

}  // namespace tracing

#pragma once
// interceptor_chain: runs a chain of server or client interceptors (rpc/interceptor.hpp) the same
// way on both sides: starts in order up to the first refusal, ends in reverse order for every
// interceptor whose start was asked, exceptions turned into a status (start) or a log line (end).
// Layer: rpc. Threading: immutable once built; run from any number of threads.

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "log/log.hpp"
#include "rpc/interceptor.hpp"

namespace rdmarpc {

template <typename Interceptor>
class interceptor_chain {
 public:
  interceptor_chain() = default;
  explicit interceptor_chain(std::vector<std::shared_ptr<Interceptor>> chain) : chain_(std::move(chain)) {
    std::erase(chain_, nullptr);
  }

  bool empty() const noexcept { return chain_.empty(); }
  std::size_t size() const noexcept { return chain_.size(); }

  // Asks each interceptor in order; stops at the first refusal. `asked` tells on_end how many
  // were asked (the refusing one included).
  // Inlined into the call path: out of line, its prologue and epilogue cost about as much as the
  // loop itself (callgrind).
  template <typename Info>
  [[gnu::always_inline]] call_verdict start(const Info& call, metadata& added, std::uint16_t& asked) const {
    asked = 0;
    for (const auto& i : chain_) {
      ++asked;
      try {
        call_verdict v = i->on_call_start(call, added);  // constructed in place: no string moved
        if (v.code != status_code::ok) [[unlikely]]
          return v;
      } catch (const std::exception& e) {
        return {status_code::internal, std::string("interceptor threw: ") + e.what()};
      } catch (...) {
        return {status_code::internal, "interceptor threw a non-standard exception"};
      }
    }
    return {};
  }

  // on_call_end of the first `asked` interceptors, last first.
  template <typename Info>
  [[gnu::always_inline]] void end(std::uint16_t asked, const Info& call,
                                  const call_outcome& outcome) const noexcept {
    for (std::size_t k = std::min<std::size_t>(asked, chain_.size()); k-- > 0;) {
      try {
        chain_[k]->on_call_end(call, outcome);
      } catch (const std::exception& e) {
        rdmarpc::logger()->warn("rdmarpc: an interceptor's on_call_end threw (ignored): {}", e.what());
      } catch (...) {
        rdmarpc::logger()->warn("rdmarpc: an interceptor's on_call_end threw (ignored)");
      }
    }
  }

 private:
  std::vector<std::shared_ptr<Interceptor>> chain_;
};

}  // namespace rdmarpc

// Unit tests of received_message (transport/received_message.hpp): a lent message gives its bytes
// back to its owner exactly once, however it is moved; a message that owns its bytes (reassembled
// rdma fragments) keeps them readable in place across moves and frees them on release.
#include "transport/received_message.hpp"

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

using rdmarpc::transport::received_message;

namespace {

struct counting_owner final : received_message::owner, std::enable_shared_from_this<counting_owner> {
  std::vector<std::uint64_t> released;
  void release_message(std::uint64_t token) noexcept override { released.push_back(token); }
  std::shared_ptr<owner> keep_alive() noexcept override { return shared_from_this(); }
};

std::vector<std::byte> bytes_of(std::size_t n) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i);
  return v;
}

}  // namespace

TEST_CASE("received_message: lent bytes go back once, after moves too", "[received_message]") {
  auto lender = std::make_shared<counting_owner>();
  const auto data = bytes_of(16);
  {
    received_message m(data, *lender, 7);
    received_message moved(std::move(m));
    CHECK(m.empty());
    CHECK(moved.bytes().data() == data.data());
    received_message assigned;
    assigned = std::move(moved);
    CHECK(assigned.size() == 16);
    CHECK(lender->released.empty());
  }
  CHECK(lender->released == std::vector<std::uint64_t>{7});
}

TEST_CASE("received_message: owned bytes stay in place across moves and go on release",
          "[received_message]") {
  auto storage = bytes_of(3000);
  const std::byte* const where = storage.data();
  received_message m(std::move(storage));
  REQUIRE(m.size() == 3000);
  CHECK(m.bytes().data() == where);

  received_message moved(std::move(m));
  CHECK(m.empty());
  CHECK(moved.bytes().data() == where);
  CHECK(moved.bytes()[2999] == static_cast<std::byte>(2999 % 256));

  // Assigned over a lent message: that one is given back first.
  auto lender = std::make_shared<counting_owner>();
  const auto lent = bytes_of(8);
  received_message target(lent, *lender, 3);
  target = std::move(moved);
  CHECK(lender->released == std::vector<std::uint64_t>{3});
  CHECK(target.bytes().data() == where);
  CHECK(moved.empty());

  // An owned message assigned over another owned one frees the old bytes (ASan checks the leak).
  received_message other(bytes_of(100));
  other = std::move(target);
  CHECK(other.size() == 3000);
  other.release();
  CHECK(other.empty());
  other.release();  // idempotent
  CHECK(other.empty());
}

// The named "rdmarpc" logger (rdmarpc/log.hpp): an application sinks, levels and silences the
// library's lines through it; a connection over tcp logs one line when the server accepts it and
// one when it closes (with why), and calls log nothing; the default logger forwards to spdlog's
// default one.
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <rdmarpc/log.hpp>
#include <string>
#include <thread>
#include <vector>

#include "e2e_harness.hpp"

using namespace rdmarpc;
using namespace rdmarpc::test;
using namespace std::chrono_literals;

namespace {

// Keeps every line's level and text.
class capture_sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  struct line {
    spdlog::level::level_enum level;
    std::string text;
  };
  std::vector<line> lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }
  std::size_t count_containing(const std::string& needle) {
    std::size_t n = 0;
    for (const auto& l : lines())
      if (l.text.find(needle) != std::string::npos) ++n;
    return n;
  }
  // Waits (bounded) until a line contains `needle`: the server logs on its own thread.
  bool wait_for(const std::string& needle, std::chrono::milliseconds timeout = 10s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (count_containing(needle) == 0) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }
  std::string dump() {
    std::string all;
    for (const auto& l : lines()) {
      const auto level = spdlog::level::to_string_view(l.level);
      all += "  [" + std::string(level.data(), level.size()) + "] " + l.text + "\n";
    }
    return all;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.push_back({msg.level, std::string(msg.payload.data(), msg.payload.size())});
  }
  void flush_() override {}

 private:
  std::vector<line> lines_;
};

// Installs a capturing "rdmarpc" logger for one test and drops it afterwards.
struct captured_logger {
  std::shared_ptr<capture_sink> sink = std::make_shared<capture_sink>();
  std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>(std::string(kLoggerName), sink);
  captured_logger() {
    logger->set_level(spdlog::level::debug);
    set_logger(logger);
  }
  ~captured_logger() { set_logger(nullptr); }
};

// Opens a channel (one tcp connection) to the harness's server, makes `calls` calls and closes it.
void connect_call_close(e2e_harness& h, int calls) {
  auto ch = h.make_channel();
  for (int i = 0; i < calls; ++i) REQUIRE_FALSE(call(*ch, test_service::echo, make_request("hi")).ec);
  ch->close();
}

}  // namespace

TEST_CASE("a tcp connection logs one line when accepted and one when closed, none per call") {
  captured_logger captured;
  {
    e2e_harness h("tcp");
    connect_call_close(h, 50);
    INFO("rdmarpc lines:\n" << captured.sink->dump());
    REQUIRE(captured.sink->wait_for("closed:"));
    CHECK(captured.sink->count_containing("rdmarpc server: accepted a connection from tcp://127.0.0.1:") ==
          1);
    CHECK(captured.sink->count_containing("rdmarpc server: connection from tcp://127.0.0.1:") == 1);
    CHECK(captured.sink->count_containing("closed: ") == 1);
    CHECK(captured.sink->count_containing("rdmarpc channel: connected to tcp://127.0.0.1:") == 1);
    // Connection events only: listening, accepted, connected, closed (and the transport's own
    // listening line at debug), however many calls were made.
    CHECK(captured.sink->lines().size() <= 6);
    for (const auto& l : captured.sink->lines()) {
      if (l.text.find("accepted") != std::string::npos || l.text.find("closed:") != std::string::npos)
        CHECK(l.level == spdlog::level::info);
    }
  }
}

TEST_CASE("setting the rdmarpc logger's level to off silences the library") {
  captured_logger captured;
  captured.logger->set_level(spdlog::level::off);
  {
    e2e_harness h("tcp");
    connect_call_close(h, 3);
    std::this_thread::sleep_for(200ms);  // time for the server's close line, were it logged
  }
  INFO("rdmarpc lines:\n" << captured.sink->dump());
  CHECK(captured.sink->lines().empty());
}

TEST_CASE("rdmarpc::logger() uses a logger the application registered under \"rdmarpc\"") {
  set_logger(nullptr);
  auto sink = std::make_shared<capture_sink>();
  auto own = std::make_shared<spdlog::logger>("rdmarpc", sink);
  spdlog::register_logger(own);
  CHECK(logger() == own);
  logger()->warn("from the library");
  CHECK(sink->count_containing("from the library") == 1);
  set_logger(nullptr);
  CHECK(spdlog::get("rdmarpc") == nullptr);
}

TEST_CASE("set_logger with another name registers a clone named rdmarpc over the same sinks") {
  auto sink = std::make_shared<capture_sink>();
  auto app = std::make_shared<spdlog::logger>("app", sink);
  app->set_level(spdlog::level::err);
  set_logger(app);
  CHECK(logger()->name() == "rdmarpc");
  CHECK(logger()->level() == spdlog::level::err);
  logger()->warn("below the level");
  logger()->error("at the level");
  CHECK(sink->count_containing("below the level") == 0);
  CHECK(sink->count_containing("at the level") == 1);
  set_logger(nullptr);
}

TEST_CASE("without a registered logger, rdmarpc's lines go to spdlog's default logger's sinks") {
  set_logger(nullptr);
  const auto previous_default = spdlog::default_logger();
  const auto previous_level = spdlog::get_level();
  auto sink = std::make_shared<capture_sink>();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("app", sink));
  spdlog::set_level(spdlog::level::info);  // the global level: the new rdmarpc logger starts at it

  auto made = logger();
  CHECK(made->name() == "rdmarpc");
  CHECK(spdlog::get("rdmarpc") == made);  // registered: the next call finds the same one
  CHECK(logger() == made);
  made->info("forwarded");
  made->debug("below the global level");
  CHECK(sink->count_containing("forwarded") == 1);
  CHECK(sink->count_containing("below the global level") == 0);

  set_logger(nullptr);
  spdlog::set_default_logger(previous_default);
  spdlog::set_level(previous_level);
}

TEST_CASE("a limit a connection hits is logged once for that connection, not once per refused call") {
  captured_logger captured;
  server_options so;
  so.max_in_flight_per_connection = 1;
  e2e_harness h("tcp", so);
  const std::string needle = "max_in_flight_per_connection";
  // Each connection holds its one slot with a sleeping call; its further calls are refused.
  const auto refuse_three = [&](channel& ch, int sleeps_before) {
    h.service().hold_again();
    auto slow = start_call(ch, test_service::sleep, make_request("hold", test_service::until_released));
    REQUIRE(h.service().wait_for([&] { return h.service().sleeps_started.load() == sleeps_before + 1; }));
    for (int i = 0; i < 3; ++i)
      CHECK(to_status_code(call(ch, test_service::echo, make_request("over")).ec) ==
            status_code::resource_exhausted);
    h.service().release_held();
    REQUIRE(slow.wait_for(30s) == std::future_status::ready);
    CHECK_FALSE(slow.get().ec);
  };
  auto first = h.make_channel();
  refuse_three(*first, 0);
  INFO("rdmarpc lines:\n" << captured.sink->dump());
  CHECK(captured.sink->count_containing(needle) == 1);
  auto second = h.make_channel();
  refuse_three(*second, 1);
  CHECK(captured.sink->count_containing(needle) == 2);  // once per connection
  for (const auto& l : captured.sink->lines()) {
    if (l.text.find(needle) != std::string::npos) CHECK(l.level == spdlog::level::warn);
  }
}

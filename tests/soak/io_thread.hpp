#pragma once
// io_thread: an io_context run by a thread of its own until destroyed (then it finishes its work
// and joins). The soak tools' client and in-process server threads. Test support.
// Threading: executor() from any thread; construct and destroy on one.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <thread>

namespace rdmarpc::soak {

class io_thread {
 public:
  io_thread() : guard_(io_.get_executor()), thread_([this] { io_.run(); }) {}
  ~io_thread() {
    guard_.reset();
    thread_.join();
  }
  io_thread(const io_thread&) = delete;
  io_thread& operator=(const io_thread&) = delete;
  boost::asio::any_io_executor executor() { return io_.get_executor(); }

 private:
  // Run by one thread, without the reactor's per-descriptor locks: what README recommends for
  // such io_contexts, and what rdmarpc must keep safe (TSan runs these tests).
  boost::asio::io_context io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  std::thread thread_;
};

}  // namespace rdmarpc::soak

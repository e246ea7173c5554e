#pragma once
// track_work: outstanding work on the executor a completion handler will run on. An asynchronous
// operation holds it while it waits and until the handler is on its way, so that executor's
// io_context does not run out of work meanwhile (Asio's rule), also when it is not the
// operation's own. Layer: transport.

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/prefer.hpp>

namespace rdmarpc::transport {

// `fallback`: the operation's executor, where a handler with no executor of its own runs.
template <typename Handler>
boost::asio::any_completion_executor track_work(const Handler& handler,
                                                const boost::asio::any_io_executor& fallback) {
  return boost::asio::prefer(boost::asio::get_associated_executor(handler, fallback),
                             boost::asio::execution::outstanding_work.tracked);
}

}  // namespace rdmarpc::transport

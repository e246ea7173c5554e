// The one translation unit that compiles Asio's implementation (BOOST_ASIO_SEPARATE_COMPILATION):
// every other file includes only Asio's declarations, which keeps builds on 2 cores bearable.
#include <boost/asio/impl/src.hpp>

// capnp_echo_bench: the Cap'n Proto RPC baseline of the echo benchmark (the echo of
// bench/echo_bench.proto written as bench/capnp_baseline/echo_bench.capnp, same client flags as
// rdmarpc_echo_bench and grpc_echo_bench). Modes:
//   server --listen HOST:PORT                serve until SIGINT/SIGTERM
//   client --target HOST:PORT [client flags] run the payload x concurrency matrix
//   inproc [client flags]                    server thread + client in one process (callgrind)
//   idle [--seconds S] [--json PATH]         CPU used by a connected, idle client+server
// URIs may carry a "tcp://" prefix so scripts can use one address form for every system.
// The modes themselves are bench/common/baseline_main.hpp's.
#include <kj/exception.h>

#include <iostream>

#include "bench/capnp_baseline/echo_client.hpp"
#include "bench/capnp_baseline/echo_server.hpp"
#include "bench/common/baseline_main.hpp"

int main(int argc, char** argv) {
  using namespace rdmarpc::bench;
  constexpr baseline_names names{.program = "capnp_echo_bench",
                                 .system = "capnp",
                                 .not_connected = "Cap'n Proto connection did not come up"};
  try {
    return baseline_main<capnp_baseline::echo_client, capnp_baseline::echo_server>(argc, argv, names);
  } catch (const kj::Exception& e) {  // KJ's exceptions are not std::exceptions
    std::cerr << names.program << ": " << e.getDescription().cStr() << "\n";
    return 1;
  }
}

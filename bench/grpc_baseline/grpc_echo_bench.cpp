// grpc_echo_bench: the gRPC C++ baseline of the echo benchmark (same .proto, same client flags as
// rdmarpc_echo_bench). Modes:
//   server --listen HOST:PORT                serve until SIGINT/SIGTERM
//   client --target HOST:PORT [client flags] run the payload x concurrency matrix
//   inproc [client flags]                    server thread + client in one process (callgrind)
//   idle [--seconds S] [--json PATH]         CPU used by a connected, idle client+server
// URIs may carry a "tcp://" prefix so scripts can use one address form for every system.
// The modes themselves are bench/common/baseline_main.hpp's.
#include "bench/common/baseline_main.hpp"
#include "bench/grpc_baseline/echo_client.hpp"
#include "bench/grpc_baseline/echo_server.hpp"

int main(int argc, char** argv) {
  using namespace rdmarpc::bench;
  return baseline_main<grpc_baseline::echo_client, grpc_baseline::echo_server>(
      argc, argv,
      {.program = "grpc_echo_bench", .system = "grpc", .not_connected = "gRPC channel did not connect"});
}

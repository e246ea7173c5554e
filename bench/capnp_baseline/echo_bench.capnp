# The echo service of bench/echo_bench.proto in Cap'n Proto's schema language, for the Cap'n Proto
# RPC baseline (capnp_echo_bench): one method, the request's payload comes back in the reply.
@0xb2af336d5698f28d;

interface EchoBench {
  # Answers with the request's payload.
  echo @0 (payload :Data) -> (payload :Data);
}

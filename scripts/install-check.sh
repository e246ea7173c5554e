#!/usr/bin/env bash
# install-check.sh [BUILD_DIR]: uses rdmarpc the way a user of an installed copy does. Installs
# BUILD_DIR (default build/, already built) into a temporary prefix with `cmake --install`, checks
# the installed tree (headers under include/rdmarpc/, the plugin, the CMake package, the .pc file,
# no path into the source or build tree), builds examples/greeter/standalone as a separate CMake
# project against it (find_package(rdmarpc CONFIG REQUIRED) + rdmarpc_generate, with
# -Wall -Wextra -Werror) and runs its server and client over tcp://127.0.0.1; builds and runs a
# small program that adds health and reflection (rdmarpc::services) to a server; then builds the
# client again with nothing but protoc, the installed plugin and `pkg-config --cflags --libs
# rdmarpc`, and runs that one against the server too. Exit 0 when all of it worked.
# The prefix and builds live in a temporary directory, removed on success (kept, and named, on
# failure). scripts/test.sh runs this as the stage "install check".
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rdmarpc-install-check.XXXXXX")
PREFIX=$WORK/prefix
JOBS=${RDMARPC_INSTALL_CHECK_JOBS:-2}
ok=0
finish() {
  if ((ok)); then rm -rf "$WORK"; else echo "install-check: FAILED (kept $WORK)"; fi
}
trap finish EXIT
step() { printf -- '---- install-check: %s\n' "$*"; }
fail() { echo "install-check: FAILED: $*"; exit 1; }

step "cmake --install $BUILD --prefix $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" || { cat "$WORK/install.log"; fail "cmake --install"; }

step "the installed tree"
for f in include/rdmarpc/channel.hpp include/rdmarpc/server.hpp include/rdmarpc/log.hpp \
         include/rdmarpc/rpc/channel.hpp include/rdmarpc/transport/connection.hpp include/rdmarpc/wire.proto \
         include/rdmarpc/health_service.hpp include/rdmarpc/reflection_service.hpp \
         include/rdmarpc/services/health_service.hpp include/rdmarpc/grpc/health/v1/health.proto \
         include/rdmarpc/grpc/health/v1/health.rdmarpc.pb.h include/rdmarpc/grpc/reflection/v1/reflection.proto \
         include/rdmarpc/grpc/reflection/v1/reflection.pb.h bin/protoc-gen-rdmarpc bin/rdmarpc; do
  [[ -e $PREFIX/$f ]] || fail "$f is not installed"
done
config=$(find "$PREFIX" -name rdmarpcConfig.cmake -print -quit)
pc=$(find "$PREFIX" -name rdmarpc.pc -print -quit)
[[ -n $config ]] || fail "no rdmarpcConfig.cmake"
[[ -n $pc ]] || fail "no rdmarpc.pc"
ls "$(dirname "$config")/../.."/librdmarpc_* >/dev/null || fail "no librdmarpc_* beside the CMake package"
# An installed package must not point back into the tree it was built from.
if grep -l -e "$ROOT" -e "$BUILD" "$(dirname "$config")"/*.cmake "$pc"; then
  fail "the files above name the source or build tree"
fi
echo "ok: headers, libraries, plugin, $(realpath --relative-to="$PREFIX" "$config"), $(realpath --relative-to="$PREFIX" "$pc")"

step "examples/greeter/standalone against the prefix (a separate CMake project)"
cmake -S "$ROOT/examples/greeter/standalone" -B "$WORK/greeter" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror" >"$WORK/greeter-configure.log" ||
  { cat "$WORK/greeter-configure.log"; fail "configuring the standalone greeter"; }
cmake --build "$WORK/greeter" -j "$JOBS" || fail "building the standalone greeter"
# Built again unchanged, nothing runs: Ninja reruns a command whose depfile does not name its first
# output, and rdmarpc_generate's once regenerated and recompiled every proto on every build.
if ! ninja -C "$WORK/greeter" -n | grep -q "no work to do"; then
  ninja -C "$WORK/greeter" -n -d explain 2>&1 | sed -n 1,20p  # sed reads it all: no SIGPIPE
  fail "a second build of the unchanged standalone greeter would run the commands above"
fi
# The plugin that generated its code is the installed one.
grep -q -- "--plugin=protoc-gen-rdmarpc=$PREFIX/bin/protoc-gen-rdmarpc" "$WORK/greeter/build.ninja" ||
  fail "rdmarpc_generate did not use the installed plugin"

step "greeter_server + greeter_client over tcp://127.0.0.1"
bash "$ROOT/examples/greeter/run_greeter_example.sh" "$WORK/greeter/greeter_server" "$WORK/greeter/greeter_client" \
  tcp://127.0.0.1:0 || fail "the standalone greeter did not answer as expected"

step "rdmarpc::services against the prefix (health and reflection, one line each)"
mkdir -p "$WORK/services-src"
cat >"$WORK/services-src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(services_check LANGUAGES CXX)
find_package(rdmarpc CONFIG REQUIRED)
add_executable(services_check main.cpp)
target_link_libraries(services_check PRIVATE rdmarpc::services)
CMAKE
cat >"$WORK/services-src/main.cpp" <<'CPP'
#include <boost/asio/io_context.hpp>
#include <rdmarpc/health_service.hpp>
#include <rdmarpc/reflection_service.hpp>
#include <rdmarpc/server.hpp>

int main() {
  boost::asio::io_context io;
  rdmarpc::services::health_service health;
  rdmarpc::services::reflection_service reflection;
  rdmarpc::server server(io.get_executor());
  server.add_service(health);
  reflection.add_to(server);
  health.set_status("grpc.health.v1.Health", rdmarpc::services::kServing);
  grpc::reflection::v1::ServerReflectionRequest request;
  request.set_file_containing_symbol("grpc.health.v1.Health");
  grpc::reflection::v1::ServerReflectionResponse response;
  reflection.answer(request, response);
  return response.file_descriptor_response().file_descriptor_proto_size() == 1 && server.service_names().size() == 2 ? 0 : 1;
}
CPP
cmake -S "$WORK/services-src" -B "$WORK/services" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror" >"$WORK/services-configure.log" ||
  { cat "$WORK/services-configure.log"; fail "configuring a program using rdmarpc::services"; }
cmake --build "$WORK/services" -j "$JOBS" || fail "building a program using rdmarpc::services"
"$WORK/services/services_check" || fail "health and reflection did not answer in the installed build"

step "the installed rdmarpc tool (descriptors from --proto; no server needed)"
"$PREFIX/bin/rdmarpc" --help >/dev/null || fail "bin/rdmarpc --help"
"$PREFIX/bin/rdmarpc" list tcp://127.0.0.1:1 --proto greeter/greeter.proto -I "$ROOT/examples/greeter/proto" |
  grep -q '^greeter\.' || fail "bin/rdmarpc list --proto did not list the greeter service"
echo "ok: $("$PREFIX/bin/rdmarpc" list tcp://127.0.0.1:1 --proto greeter/greeter.proto -I "$ROOT/examples/greeter/proto")"

step "pkg-config --cflags --libs rdmarpc"
export PKG_CONFIG_PATH=$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
flags=$(pkg-config --cflags --libs rdmarpc) || fail "pkg-config cannot read rdmarpc.pc"
echo "$flags"
mkdir -p "$WORK/pc"
protoc --plugin=protoc-gen-rdmarpc="$PREFIX/bin/protoc-gen-rdmarpc" -I "$ROOT/examples/greeter/proto" \
  --cpp_out="$WORK/pc" --rdmarpc_out="$WORK/pc" greeter/greeter.proto || fail "protoc with the installed plugin"
# The rpath matters for an installation with shared libraries (-DBUILD_SHARED_LIBS=ON) only.
libdir=$(pkg-config --variable=libdir rdmarpc)
# shellcheck disable=SC2086  # $flags is a list of words
g++ -O1 -Wall -Wextra -Werror -I "$WORK/pc" "$ROOT/examples/greeter/greeter_client.cpp" \
  "$WORK/pc/greeter/greeter.pb.cc" "$WORK/pc/greeter/greeter.rdmarpc.pb.cc" $flags "-Wl,-rpath,$libdir" \
  -o "$WORK/pc/greeter_client" ||
  fail "building greeter_client with pkg-config's flags"
bash "$ROOT/examples/greeter/run_greeter_example.sh" "$WORK/greeter/greeter_server" "$WORK/pc/greeter_client" \
  tcp://127.0.0.1:0 || fail "the pkg-config greeter_client did not answer as expected"

ok=1
echo "install-check: ok (installed, found by find_package and pkg-config, greeter built and answered)"

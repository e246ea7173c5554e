#pragma once
// <rdmarpc/server.hpp>: rdmarpc::server and server_options.
// The public, prefixed name of rpc/server.hpp (see there; threading rules included). Layer: public API.
#include "rpc/server.hpp"  // IWYU pragma: export

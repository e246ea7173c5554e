#pragma once
// <rdmarpc/server_done.hpp>: rdmarpc::server_done, a callback handler's completion.
// The public, prefixed name of rpc/server_done.hpp (see there; threading rules included). Layer: public API.
#include "rpc/server_done.hpp"  // IWYU pragma: export

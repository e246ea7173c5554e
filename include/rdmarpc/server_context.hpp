#pragma once
// <rdmarpc/server_context.hpp>: rdmarpc::server_context, what a handler knows about its call.
// The public, prefixed name of rpc/server_context.hpp (see there; threading rules included). Layer: public
// API.
#include "rpc/server_context.hpp"  // IWYU pragma: export

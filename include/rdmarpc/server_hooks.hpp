#pragma once
// <rdmarpc/server_hooks.hpp>: the admission and call hooks of server_options.
// The public, prefixed name of rpc/server_hooks.hpp (see there; threading rules included). Layer: public API.
#include "rpc/server_hooks.hpp"  // IWYU pragma: export

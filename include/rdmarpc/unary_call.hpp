#pragma once
// <rdmarpc/unary_call.hpp>: async_unary_call, used by generated stubs.
// The public, prefixed name of rpc/unary_call.hpp (see there; threading rules included). Layer: public API.
#include "rpc/unary_call.hpp"  // IWYU pragma: export

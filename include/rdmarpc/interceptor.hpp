#pragma once
// <rdmarpc/interceptor.hpp>: server_interceptor, client_interceptor, call_outcome.
// The public, prefixed name of rpc/interceptor.hpp (see there; threading rules included). Layer: public API.
#include "rpc/interceptor.hpp"  // IWYU pragma: export

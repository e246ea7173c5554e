#pragma once
// <rdmarpc/client_context.hpp>: rdmarpc::client_context, a call's deadline, metadata and results.
// The public, prefixed name of rpc/client_context.hpp (see there; threading rules included). Layer: public
// API.
#include "rpc/client_context.hpp"  // IWYU pragma: export

#pragma once
// <rdmarpc/channel.hpp>: rdmarpc::channel and channel_options, the client end.
// The public, prefixed name of rpc/channel.hpp (see there; threading rules included). Layer: public API.
#include "rpc/channel.hpp"  // IWYU pragma: export

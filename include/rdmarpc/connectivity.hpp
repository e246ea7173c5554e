#pragma once
// <rdmarpc/connectivity.hpp>: a channel's connectivity states.
// The public, prefixed name of rpc/connectivity.hpp (see there; threading rules included). Layer: public API.
#include "rpc/connectivity.hpp"  // IWYU pragma: export

#pragma once
// <rdmarpc/service.hpp>: rdmarpc::service, the base of generated services.
// The public, prefixed name of rpc/service.hpp (see there; threading rules included). Layer: public API.
#include "rpc/service.hpp"  // IWYU pragma: export

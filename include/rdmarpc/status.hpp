#pragma once
// <rdmarpc/status.hpp>: rdmarpc::status_code, status_error and the error-code category.
// The public, prefixed name of rpc/status.hpp (see there; threading rules included). Layer: public API.
#include "rpc/status.hpp"  // IWYU pragma: export

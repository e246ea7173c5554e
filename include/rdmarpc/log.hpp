#pragma once
// <rdmarpc/log.hpp>: rdmarpc::logger(), the named spdlog logger of the library.
// The public, prefixed name of log/log.hpp (see there; threading rules included). Layer: public API.
#include "log/log.hpp"  // IWYU pragma: export

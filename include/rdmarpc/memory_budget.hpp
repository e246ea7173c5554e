#pragma once
// <rdmarpc/memory_budget.hpp>: transport::memory_budget, registered memory shared by servers and channels.
// The public, prefixed name of transport/memory_budget.hpp (see there; threading rules included). Layer:
// public API.
#include "transport/memory_budget.hpp"  // IWYU pragma: export

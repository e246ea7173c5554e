#pragma once
// <rdmarpc/method.hpp>: rdmarpc::method_descriptor, a method's wire identity.
// The public, prefixed name of rpc/method.hpp (see there; threading rules included). Layer: public API.
#include "rpc/method.hpp"  // IWYU pragma: export

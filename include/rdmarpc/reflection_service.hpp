#pragma once
// <rdmarpc/reflection_service.hpp>: rdmarpc::services::reflection_service (grpc.reflection.v1).
// The public, prefixed name of services/reflection_service.hpp (see there; threading rules included).
// Layer: public API; link rdmarpc::services.
#include "services/reflection_service.hpp"  // IWYU pragma: export

#pragma once
// <rdmarpc/health_service.hpp>: rdmarpc::services::health_service (grpc.health.v1) and serving_status.
// The public, prefixed name of services/health_service.hpp (see there; threading rules included).
// Layer: public API; link rdmarpc::services.
#include "services/health_service.hpp"  // IWYU pragma: export

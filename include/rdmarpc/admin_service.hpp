#pragma once
// <rdmarpc/admin_service.hpp>: rdmarpc::services::admin_service (rdmarpc.admin.v1.Admin: the server's
// figures). The public, prefixed name of services/admin_service.hpp (see there; threading rules
// included). Layer: public API; link rdmarpc::services.
#include "services/admin_service.hpp"  // IWYU pragma: export

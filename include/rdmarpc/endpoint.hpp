#pragma once
// <rdmarpc/endpoint.hpp>: transport::endpoint, rdma:// and tcp:// URIs.
// The public, prefixed name of transport/endpoint.hpp (see there; threading rules included). Layer: public
// API.
#include "transport/endpoint.hpp"  // IWYU pragma: export

#pragma once
// <rdmarpc/message_parser.hpp>: rdmarpc::message_parser, the generated parsers of plain message types.
// The public, prefixed name of rpc/message_parser.hpp (see there). Layer: public API.
#include "rpc/message_parser.hpp"  // IWYU pragma: export

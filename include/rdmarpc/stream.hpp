#pragma once
// <rdmarpc/stream.hpp>: streaming calls: client_stream, server_reader, server_writer, server_reader_writer.
// The public, prefixed name of rpc/stream.hpp (see there; threading rules included). Layer: public API.
#include "rpc/stream.hpp"  // IWYU pragma: export

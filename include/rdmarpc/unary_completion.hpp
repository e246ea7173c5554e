#pragma once
// <rdmarpc/unary_completion.hpp>: unary_completion, what a generated Interface hands its do_* functions.
// The public, prefixed name of rpc/unary_completion.hpp (see there; threading rules included). Layer: public
// API.
#include "rpc/unary_completion.hpp"  // IWYU pragma: export

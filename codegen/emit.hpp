#pragma once
// Printing the generated files: foo.rdmarpc.pb.h and foo.rdmarpc.pb.cc from a file_model.
// Layer: codegen. The shape is the contract in docs/generated-api.md. Threading: stateless.

#include <string>

#include "model.hpp"

namespace rdmarpc::codegen {

// The first line of every generated file.
std::string generated_stamp(const file_model& file);

std::string emit_header(const file_model& file);
std::string emit_source(const file_model& file);

}  // namespace rdmarpc::codegen

#pragma once
// JSON in and out of dynamic messages (protobuf's JSON mapping, google/protobuf/util/json_util.h):
// the requests of -d (text, @FILE, @- for stdin; one or more objects) and the replies printed one
// per line. Layer: tools/cli. Threading: stateless functions.

#include <google/protobuf/message.h>

#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"

namespace rdmarpc::cli {

// The request text of the command line: -d's (its file, or stdin), else the JSON argument at
// `argument_index` of o.arguments, else "{}". Throws cli_error(kExitFailure) when a file cannot be read.
std::string request_text(const options& o, std::size_t argument_index);

// Splits `text` into its top-level JSON objects (one per line, or concatenated, with whitespace
// between). Throws cli_error(kExitBadInput) for text outside an object or an object left open.
std::vector<std::string> split_json_objects(std::string_view text);

// Parses `json` into `message` (cleared first). Throws cli_error(kExitBadInput) in a person's words:
// the field that does not exist, or the value that does not fit, and the message type.
void parse_json(std::string_view json, google::protobuf::Message& message);

// One line of JSON (no newline) for `message`.
std::string to_json_line(const google::protobuf::Message& message, bool emit_defaults);

}  // namespace rdmarpc::cli

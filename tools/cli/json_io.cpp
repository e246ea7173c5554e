#include "json_io.hpp"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>

#include "cli_error.hpp"

namespace rdmarpc::cli {

std::string request_text(const options& o, std::size_t argument_index) {
  if (!o.data) return o.arguments.size() > argument_index ? o.arguments[argument_index] : "{}";
  if (o.arguments.size() > argument_index) {
    throw cli_error(kExitUsage, "give the request either as an argument or with -d, not both");
  }
  const std::string& d = *o.data;
  if (!d.starts_with("@")) return d;
  if (d == "@-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(d.substr(1), std::ios::binary);
  if (!in) throw cli_error(kExitFailure, "cannot read requests from '" + d.substr(1) + "'");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> split_json_objects(std::string_view text) {
  std::vector<std::string> objects;
  std::size_t line = 1;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      ++i;
      continue;
    }
    if (c != '{') {
      throw cli_error(kExitBadInput, "request line " + std::to_string(line) +
                                         ": expected a JSON object ('{'), found '" + std::string(1, c) + "'");
    }
    const std::size_t start = i, start_line = line;
    int depth = 0;
    bool in_string = false, escaped = false;
    for (; i < text.size(); ++i) {
      const char x = text[i];
      if (x == '\n') ++line;
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (x == '\\') {
          escaped = true;
        } else if (x == '"') {
          in_string = false;
        }
      } else if (x == '"') {
        in_string = true;
      } else if (x == '{' || x == '[') {
        ++depth;
      } else if (x == '}' || x == ']') {
        if (--depth == 0) break;
      }
    }
    if (i >= text.size()) {
      throw cli_error(kExitBadInput,
                      "request line " + std::to_string(start_line) + ": the JSON object is never closed");
    }
    ++i;
    objects.emplace_back(text.substr(start, i - start));
  }
  return objects;
}

namespace {

// protobuf 3.21's parser says e.g. "INVALID_ARGUMENT:Cannot find field: colour" or
// "INVALID_ARGUMENT:(key): invalid value 5 for type TYPE_STRING"; keep its words, lose the code.
std::string rephrase(std::string message) {
  if (message.starts_with("INVALID_ARGUMENT:")) message.erase(0, sizeof("INVALID_ARGUMENT:") - 1);
  return message;
}

namespace gp = google::protobuf;

// The field a JSON key names: its lowerCamelCase json_name or its .proto name, as the parser accepts.
const gp::FieldDescriptor* field_named(const gp::Descriptor& d, const std::string& key) {
  for (int i = 0; i < d.field_count(); ++i) {
    if (d.field(i)->json_name() == key || d.field(i)->name() == key) return d.field(i);
  }
  return nullptr;
}

// Finds the first JSON key that names no field of the message it sits in (protobuf 3.21 says only
// "Cannot find field."), as a path ("entry.vesion"). A small recursive walk of the JSON; nullopt
// when it finds none or the text is not JSON it follows.
class unknown_field_finder {
 public:
  explicit unknown_field_finder(std::string_view text) : t_(text) {}

  std::optional<std::string> in_object(const gp::Descriptor& d, const std::string& path) {
    ws();
    if (!eat('{')) return fail();
    ws();
    if (eat('}')) return std::nullopt;
    for (;;) {
      ws();
      auto key = string();
      if (!key) return fail();
      ws();
      if (!eat(':')) return fail();
      const gp::FieldDescriptor* f = field_named(d, *key);
      if (f == nullptr) return path + *key;
      if (auto found = value_of(*f, path + *key + ".")) return found;
      if (broken_) return std::nullopt;
      ws();
      if (eat('}')) return std::nullopt;
      if (!eat(',')) return fail();
    }
  }

 private:
  // A field's value: descends into messages (not the well-known types, which have JSON forms of
  // their own), repeated messages and map values.
  std::optional<std::string> value_of(const gp::FieldDescriptor& f, const std::string& path) {
    ws();
    const gp::Descriptor* m = f.message_type();
    if (m != nullptr && f.is_map()) {
      const gp::FieldDescriptor* v = m->map_value();
      if (!eat('{')) return skip();
      ws();
      if (eat('}')) return std::nullopt;
      for (;;) {
        ws();
        auto key = string();
        ws();
        if (!key || !eat(':')) return fail();
        if (v->message_type() != nullptr && !is_well_known(*v->message_type())) {
          ws();
          if (peek('{')) {
            if (auto found = in_object(*v->message_type(), path + *key + ".")) return found;
          } else {
            skip();
          }
        } else {
          skip();
        }
        if (broken_) return std::nullopt;
        ws();
        if (eat('}')) return std::nullopt;
        if (!eat(',')) return fail();
      }
    }
    if (m == nullptr || is_well_known(*m)) return skip();
    if (f.is_repeated() && peek('[')) {
      ++i_;
      ws();
      if (eat(']')) return std::nullopt;
      for (;;) {
        ws();
        if (peek('{')) {
          if (auto found = in_object(*m, path)) return found;
        } else {
          skip();
        }
        if (broken_) return std::nullopt;
        ws();
        if (eat(']')) return std::nullopt;
        if (!eat(',')) return fail();
      }
    }
    if (peek('{')) return in_object(*m, path);
    return skip();
  }

  static bool is_well_known(const gp::Descriptor& d) { return d.full_name().starts_with("google.protobuf."); }

  std::optional<std::string> fail() {
    broken_ = true;
    return std::nullopt;
  }
  void ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\t' || t_[i_] == '\r')) ++i_;
  }
  bool peek(char c) const { return i_ < t_.size() && t_[i_] == c; }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++i_;
    return true;
  }
  // A string's content (escapes kept as written: field names have none).
  std::optional<std::string> string() {
    if (!eat('"')) return std::nullopt;
    std::string out;
    while (i_ < t_.size() && t_[i_] != '"') {
      if (t_[i_] == '\\' && i_ + 1 < t_.size()) out += t_[i_++];
      out += t_[i_++];
    }
    if (!eat('"')) return std::nullopt;
    return out;
  }
  // Skips any value; never finds anything.
  std::optional<std::string> skip() {
    ws();
    if (peek('"')) {
      if (!string()) broken_ = true;
      return std::nullopt;
    }
    if (peek('{') || peek('[')) {
      int depth = 0;
      bool in_string = false;
      for (; i_ < t_.size(); ++i_) {
        const char c = t_[i_];
        if (in_string) {
          if (c == '\\') {
            ++i_;
          } else if (c == '"') {
            in_string = false;
          }
        } else if (c == '"') {
          in_string = true;
        } else if (c == '{' || c == '[') {
          ++depth;
        } else if ((c == '}' || c == ']') && --depth == 0) {
          ++i_;
          return std::nullopt;
        }
      }
      return fail();
    }
    while (i_ < t_.size() && t_[i_] != ',' && t_[i_] != '}' && t_[i_] != ']') ++i_;
    return std::nullopt;
  }

  std::string_view t_;
  std::size_t i_ = 0;
  bool broken_ = false;
};

std::string field_list(const google::protobuf::Descriptor& d) {
  std::string names;
  for (int i = 0; i < d.field_count(); ++i) {
    names += (i == 0 ? "" : ", ") + d.field(i)->json_name();
  }
  return names.empty() ? "none" : names;
}

}  // namespace

void parse_json(std::string_view json, google::protobuf::Message& message) {
  message.Clear();
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &message);
  if (status.ok()) return;
  const std::string detail = rephrase(std::string(status.message()));
  const auto& d = *message.GetDescriptor();
  std::string text = "the request does not fit " + d.full_name() + ": " + detail;
  if (detail.find("Cannot find field") != std::string::npos) {
    if (const auto path = unknown_field_finder(json).in_object(d, "")) {
      // The message that lacks it: the request itself, or the one the path leads into.
      const gp::Descriptor* owner = &d;
      std::string_view rest = *path;
      for (auto dot = rest.find('.'); dot != std::string_view::npos && owner != nullptr;
           dot = rest.find('.')) {
        const std::string part(rest.substr(0, dot));
        const gp::FieldDescriptor* f = field_named(*owner, part);
        owner = f == nullptr
                    ? nullptr
                    : (f->is_map() ? f->message_type()->map_value()->message_type() : f->message_type());
        rest.remove_prefix(dot + 1);
      }
      text = d.full_name() + " has no field '" + *path + "'";
      if (owner != nullptr) {
        text += owner == &d ? " (its fields: " + field_list(d) + ")"
                            : " (" + owner->full_name() + "'s fields: " + field_list(*owner) + ")";
      }
    } else {
      text = "the request names a field " + d.full_name() + " does not have (" + detail + ")";
    }
  }
  throw cli_error(kExitBadInput, text);
}

std::string to_json_line(const google::protobuf::Message& message, bool emit_defaults) {
  google::protobuf::util::JsonPrintOptions print;
  print.always_print_primitive_fields = emit_defaults;
  std::string out;
  const auto status = google::protobuf::util::MessageToJsonString(message, &out, print);
  if (!status.ok()) {
    throw cli_error(kExitFailure, "cannot print the reply as JSON: " + std::string(status.message()));
  }
  return out;
}

}  // namespace rdmarpc::cli

#pragma once
// code_writer: appends text templates with $name$ placeholders to a string. Layer: codegen.
// Threading: one writer per thread. (protobuf's io::Printer would do, but this is all we need.)

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace rdmarpc::codegen {

using vars = std::map<std::string, std::string, std::less<>>;

class code_writer {
 public:
  // Appends `text` with every $name$ replaced by vars[name]. A placeholder without a value is a
  // bug in the plugin: it throws std::logic_error (protoc then reports the plugin failed).
  void print(const vars& values, std::string_view text);
  void print(std::string_view text) { print(vars{}, text); }
  void print_raw(std::string_view text) { out_.append(text); }

  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace rdmarpc::codegen

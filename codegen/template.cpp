// code_writer (see template.hpp).

#include "template.hpp"

#include <stdexcept>

namespace rdmarpc::codegen {

void code_writer::print(const vars& values, std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t open = text.find('$', pos);
    if (open == std::string_view::npos) {
      out_.append(text.substr(pos));
      return;
    }
    const std::size_t close = text.find('$', open + 1);
    if (close == std::string_view::npos) throw std::logic_error("unterminated $ placeholder in a template");
    out_.append(text.substr(pos, open - pos));
    const std::string_view name = text.substr(open + 1, close - open - 1);
    const auto it = values.find(name);
    if (it == values.end())
      throw std::logic_error("template placeholder $" + std::string(name) + "$ has no value");
    out_.append(it->second);
    pos = close + 1;
  }
}

}  // namespace rdmarpc::codegen

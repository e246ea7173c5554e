// rdmarpc list URI [SERVICE]: the services (one full name a line), or SERVICE's methods as
// package.Service/Method, the form `call` takes.

#include <iostream>

#include "cli_error.hpp"
#include "commands.hpp"
#include "descriptor_source.hpp"
#include "session.hpp"

namespace rdmarpc::cli {

int run_list(const options& o) {
  if (o.arguments.size() > 1) throw cli_error(kExitUsage, "list takes at most one SERVICE");
  session s(o);
  auto source = make_descriptor_source(o, s);
  if (o.arguments.empty()) {
    for (const auto& name : source->services()) std::cout << name << "\n";
    return kExitOk;
  }
  const auto& service = find_service(*source, o.arguments[0]);
  for (int i = 0; i < service.method_count(); ++i) {
    std::cout << service.full_name() << "/" << service.method(i)->name() << "\n";
  }
  return kExitOk;
}

}  // namespace rdmarpc::cli

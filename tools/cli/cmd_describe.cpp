// rdmarpc describe URI SYMBOL: a service, method, message or enum in .proto form (protobuf's
// DebugString: what the descriptor holds, without comments), after a line saying what it is.

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <iostream>

#include "cli_error.hpp"
#include "commands.hpp"
#include "descriptor_source.hpp"
#include "session.hpp"

namespace rdmarpc::cli {

namespace {

namespace gp = google::protobuf;

// Every name describe would know without guessing: services, their methods, the messages and enums
// of their files (for suggestions).
std::vector<std::string> known_names(descriptor_source& source) {
  std::vector<std::string> names;
  std::vector<const gp::FileDescriptor*> files;
  for (const auto& s : source.services()) {
    names.push_back(s);
    const auto* service = source.pool().FindServiceByName(s);
    if (service == nullptr) continue;
    for (int i = 0; i < service->method_count(); ++i) names.push_back(s + "." + service->method(i)->name());
    if (std::find(files.begin(), files.end(), service->file()) == files.end())
      files.push_back(service->file());
  }
  for (const auto* f : files) {
    for (int i = 0; i < f->message_type_count(); ++i) names.push_back(f->message_type(i)->full_name());
    for (int i = 0; i < f->enum_type_count(); ++i) names.push_back(f->enum_type(i)->full_name());
  }
  return names;
}

}  // namespace

int run_describe(const options& o) {
  if (o.arguments.size() != 1)
    throw cli_error(kExitUsage, "describe takes one SYMBOL (e.g. kv.Store or kv.GetRequest)");
  std::string symbol = o.arguments[0];
  if (symbol.starts_with(".") || symbol.starts_with("/")) symbol.erase(0, 1);
  std::replace(symbol.begin(), symbol.end(), '/', '.');
  session s(o);
  auto source = make_descriptor_source(o, s);
  const gp::DescriptorPool& pool = source->pool();
  if (const auto* d = pool.FindServiceByName(symbol)) {
    std::cout << d->full_name() << " is a service:\n" << d->DebugString();
  } else if (const auto* m = pool.FindMethodByName(symbol)) {
    std::cout << m->full_name() << " is a method:\n" << m->DebugString();
  } else if (const auto* t = pool.FindMessageTypeByName(symbol)) {
    std::cout << t->full_name() << " is a message:\n" << t->DebugString();
  } else if (const auto* e = pool.FindEnumTypeByName(symbol)) {
    std::cout << e->full_name() << " is an enum:\n" << e->DebugString();
  } else if (const auto* f = pool.FindFieldByName(symbol)) {
    std::cout << f->full_name() << " is a field of " << f->containing_type()->full_name() << ":\n"
              << f->DebugString();
  } else {
    source->rethrow_failure();
    const auto close = close_names(symbol, known_names(*source));
    std::string text = "no service, method, message or enum named '" + symbol + "'";
    for (std::size_t i = 0; i < close.size(); ++i) {
      text += (i == 0 ? "; did you mean " : (i + 1 == close.size() ? " or " : ", ")) + close[i];
    }
    if (!close.empty()) text += "?";
    throw cli_error(kExitUnknownSymbol, text);
  }
  return kExitOk;
}

}  // namespace rdmarpc::cli

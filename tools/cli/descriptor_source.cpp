#include "descriptor_source.hpp"

#include <google/protobuf/compiler/importer.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "cli_error.hpp"
#include "session.hpp"

namespace rdmarpc::cli {

namespace gp = google::protobuf;

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string_view last_component(std::string_view name) {
  const auto dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

std::string suggestion(const std::vector<std::string>& close) {
  if (close.empty()) return "";
  std::string text = "; did you mean ";
  for (std::size_t i = 0; i < close.size(); ++i) {
    text += (i == 0 ? "" : (i + 1 == close.size() ? " or " : ", ")) + close[i];
  }
  return text + "?";
}

// Errors of the .proto compiler, kept to be reported together.
class collecting_errors : public gp::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int column, const std::string& message) override {
    text += "\n  " + file +
            (line < 0 ? "" : ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1)) + ": " +
            message;
  }
  std::string text;
};

class proto_file_source final : public descriptor_source {
 public:
  explicit proto_file_source(const options& o) : importer_(&tree_, &errors_) {
    namespace fs = std::filesystem;
    for (const auto& dir : o.import_dirs) tree_.MapPath("", dir);
    if (o.import_dirs.empty()) tree_.MapPath("", ".");
    // The well-known types (google/protobuf/*.proto) where Debian's libprotobuf-dev puts them.
    if (fs::exists("/usr/include/google/protobuf/descriptor.proto")) tree_.MapPath("", "/usr/include");
    for (const auto& file : o.proto_files) {
      std::string virtual_name, shadowing;
      if (tree_.DiskFileToVirtualFile(file, &virtual_name, &shadowing) !=
          gp::compiler::DiskSourceTree::SUCCESS) {
        // Not under an import path: look it up as named, relative to the import paths.
        virtual_name = file;
      }
      const gp::FileDescriptor* fd = importer_.Import(virtual_name);
      if (fd == nullptr) {
        std::string text = "cannot use --proto " + file;
        if (errors_.text.empty()) {
          text += ": not found under the import paths (-I DIR; default .)";
        } else {
          text += ":" + errors_.text;
        }
        throw cli_error(kExitBadInput, text);
      }
      for (int i = 0; i < fd->service_count(); ++i) services_.push_back(fd->service(i)->full_name());
    }
    std::sort(services_.begin(), services_.end());
    services_.erase(std::unique(services_.begin(), services_.end()), services_.end());
  }

  std::vector<std::string> services() override { return services_; }
  const gp::DescriptorPool& pool() override { return *importer_.pool(); }

 private:
  gp::compiler::DiskSourceTree tree_;
  collecting_errors errors_;
  gp::compiler::Importer importer_;
  std::vector<std::string> services_;
};

}  // namespace

std::vector<std::string> close_names(std::string_view wanted, const std::vector<std::string>& names) {
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& name : names) {
    std::size_t d =
        std::min(edit_distance(wanted, name), edit_distance(last_component(wanted), last_component(name)));
    const std::size_t limit = std::max<std::size_t>(2, wanted.size() / 3);
    if (d <= limit) scored.emplace_back(d, name);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < 3; ++i) out.push_back(scored[i].second);
  return out;
}

std::unique_ptr<descriptor_source> make_proto_file_source(const options& o) {
  return std::make_unique<proto_file_source>(o);
}

std::unique_ptr<descriptor_source> make_descriptor_source(const options& o, session& s) {
  if (!o.proto_files.empty()) return make_proto_file_source(o);
  return make_reflection_source(s);
}

const gp::ServiceDescriptor& find_service(descriptor_source& source, std::string_view name) {
  const auto services = source.services();
  if (std::find(services.begin(), services.end(), name) != services.end()) {
    if (const auto* s = source.pool().FindServiceByName(std::string(name))) return *s;
    source.rethrow_failure();
    throw cli_error(kExitFailure,
                    "the server lists service '" + std::string(name) + "' but has no descriptor for it");
  }
  throw cli_error(kExitUnknownSymbol,
                  "no service '" + std::string(name) + "' on " +
                      (services.empty() ? std::string("this server (it lists none)")
                                        : "this server" + suggestion(close_names(name, services))));
}

const gp::MethodDescriptor& find_method(descriptor_source& source, std::string_view name) {
  std::string text(name);
  if (text.starts_with("/")) text.erase(0, 1);
  auto split = text.rfind('/');
  if (split == std::string::npos) split = text.rfind('.');
  if (split == std::string::npos || split == 0 || split + 1 == text.size()) {
    throw cli_error(kExitUsage,
                    "'" + std::string(name) + "' is not a method name: use package.Service/Method");
  }
  const std::string service_name = text.substr(0, split), method_name = text.substr(split + 1);
  const auto& service = find_service(source, service_name);
  if (const auto* m = service.FindMethodByName(method_name)) return *m;
  std::vector<std::string> methods;
  for (int i = 0; i < service.method_count(); ++i) methods.push_back(service.method(i)->name());
  std::string names;
  for (const auto& m : methods) names += (names.empty() ? "" : ", ") + m;
  std::string hint = suggestion(close_names(method_name, methods));
  if (hint.empty()) hint = " (its methods: " + names + ")";
  throw cli_error(kExitUnknownSymbol,
                  "service " + service_name + " has no method '" + method_name + "'" + hint);
}

}  // namespace rdmarpc::cli

#include "log/log.hpp"

#include <spdlog/common.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <string>
#include <utility>

namespace rdmarpc {
namespace {

std::string logger_name() {
  return std::string(kLoggerName);
}

// The sink of a logger rdmarpc makes itself: hands each line to the sinks of spdlog's default
// logger as it is when the line is written, so an application that configured (or replaced) its
// default logger finds rdmarpc's lines there, formatted by those sinks, as before rdmarpc had a
// logger of its own. The registry's pattern, which spdlog applies to every new logger's sinks,
// lands on this sink and never on the default logger's. Without a default logger: stderr.
class default_logger_sink final : public spdlog::sinks::sink {
 public:
  void log(const spdlog::details::log_msg& msg) override {
    const auto target = spdlog::default_logger();
    if (!target) {
      fallback_->log(msg);
      return;
    }
    for (const auto& sink : target->sinks()) {
      // An application that made the rdmarpc logger its default one would loop here.
      if (sink.get() != this && sink->should_log(msg.level)) sink->log(msg);
    }
  }
  void flush() override {
    if (const auto target = spdlog::default_logger()) {
      for (const auto& sink : target->sinks())
        if (sink.get() != this) sink->flush();
    }
    fallback_->flush();
  }
  void set_pattern(const std::string& pattern) override { fallback_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    fallback_->set_formatter(std::move(formatter));
  }

 private:
  std::shared_ptr<spdlog::sinks::sink> fallback_ = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
};

}  // namespace

std::shared_ptr<spdlog::logger> logger() {
  const std::string name = logger_name();
  if (auto found = spdlog::get(name)) return found;
  auto created = std::make_shared<spdlog::logger>(name, std::make_shared<default_logger_sink>());
  try {
    // Gives it the registry's global level (spdlog::set_level), any level configured for
    // "rdmarpc" (spdlog::cfg), the pattern and the flush level, then registers it.
    spdlog::initialize_logger(created);
    return created;
  } catch (const spdlog::spdlog_ex&) {
    // Another thread registered one first: use that one.
    if (auto found = spdlog::get(name)) return found;
    return created;
  }
}

void set_logger(std::shared_ptr<spdlog::logger> replacement) {
  const std::string name = logger_name();
  if (replacement && replacement->name() != name) replacement = replacement->clone(name);
  for (int attempt = 0; attempt < 3; ++attempt) {
    spdlog::drop(name);
    if (!replacement) return;
    try {
      spdlog::register_logger(replacement);
      return;
    } catch (const spdlog::spdlog_ex&) {
      // logger() registered a default one in between: drop it and try again.
    }
  }
}

}  // namespace rdmarpc

#pragma once
// rdmarpc::logger(): the named spdlog logger ("rdmarpc") every line of the library goes to, so an
// application can level, sink or silence rdmarpc apart from its own logging. Layer: below verbs
// (used by every layer). Threading: any thread (spdlog's registry is thread-safe).
//
// The logger lives in spdlog's registry, not in rdmarpc: an application that registers its own
// logger named "rdmarpc" (spdlog::register_logger) before rdmarpc first logs, or calls
// set_logger() at any time, gets every rdmarpc line. Otherwise the first line creates one that
// writes to the sinks of spdlog's default logger at spdlog's global level (SPDLOG_LEVEL with
// "rdmarpc=debug" works after spdlog::cfg::load_env_levels()). Silence it with
// rdmarpc::logger()->set_level(spdlog::level::off).
//
// Each call looks the logger up by name (a lock and a hash lookup): the library logs only on
// connection events and faults, never per call, so nothing hot pays for it.

#include <spdlog/logger.h>

#include <memory>
#include <string_view>

namespace rdmarpc {

// The name the logger is registered under in spdlog's registry.
inline constexpr std::string_view kLoggerName = "rdmarpc";

// The "rdmarpc" logger: the registered one, or (first use) a new one over the default logger's
// sinks (stderr when there is no default logger). Never null.
std::shared_ptr<spdlog::logger> logger();

// Makes `replacement` the "rdmarpc" logger (a logger with another name is cloned under
// "rdmarpc", sharing its sinks and level). Null drops the
// registered one, so the next line makes a default one again.
void set_logger(std::shared_ptr<spdlog::logger> replacement);

}  // namespace rdmarpc

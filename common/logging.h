#pragma once
// Small structured logging: `TANDEM_LOG(Info) << "loaded " << n << " tensors";`
//
// One line per message: "I 2026-11-29T14:10:28.123Z engine/io/loader.cc:42] loaded 12 tensors".
// The threshold comes from TANDEM_LOG_LEVEL (debug|info|warning|error) or SetMinLogLevel();
// tests capture lines with SetLogSink(). TANDEM_CHECK is for true invariants only: input from
// outside (network, files, users) is an error Status, never a CHECK.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>

namespace tandem {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

// Receives each formatted line (without the trailing newline).
using LogSink = std::function<void(LogLevel, const std::string&)>;

namespace internal {

inline LogLevel LevelFromEnv() {
  const char* env = std::getenv("TANDEM_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  std::string_view v(env);
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warning") return LogLevel::kWarning;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

inline std::atomic<int>& MinLevel() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

struct SinkState {
  std::mutex mu;
  LogSink sink;  // empty: write to stderr
};
inline SinkState& Sink() {
  static SinkState state;
  return state;
}

inline char LevelLetter(LogLevel level) {
  static constexpr char kLetters[] = {'D', 'I', 'W', 'E', 'F'};
  return kLetters[static_cast<int>(level)];
}

// Strips the build's absolute prefix so lines show repo-relative paths.
inline std::string_view ShortFile(std::string_view file) {
  for (std::string_view top :
       {"/common/", "/engine/", "/agent/", "/controller/", "/tools/", "/tests/", "/proto/"}) {
    size_t pos = file.rfind(top);
    if (pos != std::string_view::npos) return file.substr(pos + 1);
  }
  return file;
}

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line) : level_(level) {
    auto now = std::chrono::system_clock::now();
    std::time_t secs = std::chrono::system_clock::to_time_t(now);
    int millis = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char stamp[64];
    std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
    stream_ << LevelLetter(level) << ' ' << stamp << ' ' << ShortFile(file) << ':' << line << "] ";
  }
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;

  ~LogMessage() {
    std::string line = stream_.str();
    {
      SinkState& state = Sink();
      std::lock_guard<std::mutex> lock(state.mu);
      if (state.sink) {
        state.sink(level_, line);
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
        std::fflush(stderr);
      }
    }
    if (level_ == LogLevel::kFatal) std::abort();
  }

  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// Swallows the stream expression when the level is filtered out.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace internal

inline void SetMinLogLevel(LogLevel level) {
  internal::MinLevel().store(static_cast<int>(level), std::memory_order_relaxed);
}
inline bool LogLevelEnabled(LogLevel level) {
  return static_cast<int>(level) >= internal::MinLevel().load(std::memory_order_relaxed);
}
// Replaces the stderr writer; pass an empty sink to restore it.
inline void SetLogSink(LogSink sink) {
  internal::SinkState& state = internal::Sink();
  std::lock_guard<std::mutex> lock(state.mu);
  state.sink = std::move(sink);
}

}  // namespace tandem

#define TANDEM_LOG(level)                                  \
  !::tandem::LogLevelEnabled(::tandem::LogLevel::k##level) \
      ? (void)0                                            \
      : ::tandem::internal::LogVoidify() &                 \
            ::tandem::internal::LogMessage(::tandem::LogLevel::k##level, __FILE__, __LINE__).stream()

// Aborts with the message when `cond` is false. Only for invariants the program itself keeps.
#define TANDEM_CHECK(cond)                                                                             \
  (cond) ? (void)0                                                                                     \
         : ::tandem::internal::LogVoidify() &                                                          \
               ::tandem::internal::LogMessage(::tandem::LogLevel::kFatal, __FILE__, __LINE__).stream() \
                   << "Check failed: " #cond " "

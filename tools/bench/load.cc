#include "tools/bench/load.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tools/bench/report.h"

namespace tandem::tools::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A blocking TCP connection with a deadline on every read.
class Connection {
 public:
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }
  Status Open(const std::string& host, uint16_t port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0) return Status::Unavailable("resolve " + host + ": " + gai_strerror(rc));
    std::string last = "no address";
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      fd_ = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd_ < 0) continue;
      if (connect(fd_, a->ai_addr, a->ai_addrlen) == 0) break;
      last = std::strerror(errno);
      close(fd_);
      fd_ = -1;
    }
    freeaddrinfo(found);
    if (fd_ < 0) return Status::Unavailable("connect " + host + ":" + std::to_string(port) + ": " + last);
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return Status::Ok();
  }
  Status Send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return Status::Unavailable(std::string("send: ") + std::strerror(errno));
      sent += static_cast<size_t>(n);
    }
    return Status::Ok();
  }
  // Appends what arrives to *buf; 0 bytes at the peer's close. DeadlineExceeded past `deadline`.
  StatusOr<size_t> Read(std::string* buf, Clock::time_point deadline) {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return Status::DeadlineExceeded("no answer within the request timeout");
      pollfd p{fd_, POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (ready < 0 && errno != EINTR)
        return Status::Unavailable(std::string("poll: ") + std::strerror(errno));
      if (ready <= 0) continue;
      char chunk[16384];
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::Unavailable(std::string("recv: ") + std::strerror(errno));
      }
      buf->append(chunk, static_cast<size_t>(n));
      return static_cast<size_t>(n);
    }
  }

 private:
  int fd_ = -1;
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// An HTTP/1.1 response read incrementally: the head, then the body de-chunked (or by length, or
// to the close), handed to `on_body` as it arrives with the time it arrived.
class ResponseReader {
 public:
  template <typename OnBody>
  Status Read(Connection* conn, Clock::time_point deadline, OnBody on_body) {
    std::string raw;
    size_t head_end = std::string::npos;
    while ((head_end = raw.find("\r\n\r\n")) == std::string::npos) {
      ASSIGN_OR_RETURN(const size_t n, conn->Read(&raw, deadline));
      if (n == 0) return Status::Unavailable("the server closed the connection before answering");
      if (raw.size() > (1 << 20)) return Status::InvalidArgument("response head over 1 MiB");
    }
    const std::string head = raw.substr(0, head_end);
    raw.erase(0, head_end + 4);
    if (head.rfind("HTTP/1.", 0) != 0 || head.size() < 12) {
      return Status::InvalidArgument("not an HTTP response: " + head.substr(0, 40));
    }
    status_ = std::atoi(head.c_str() + 9);
    const std::string lower = Lower(head);
    const bool chunked = lower.find("\r\ntransfer-encoding: chunked") != std::string::npos;
    int64_t length = -1;
    if (const size_t at = lower.find("\r\ncontent-length:"); at != std::string::npos) {
      length = std::atoll(head.c_str() + at + 17);
    }
    if (!chunked) {
      int64_t got = 0;
      for (;;) {
        if (!raw.empty()) {
          got += static_cast<int64_t>(raw.size());
          on_body(raw);
          raw.clear();
        }
        if (length >= 0 && got >= length) return Status::Ok();
        ASSIGN_OR_RETURN(const size_t n, conn->Read(&raw, deadline));
        if (n == 0) {
          return length < 0 ? Status::Ok() : Status::Unavailable("the body ended before its Content-Length");
        }
      }
    }
    // Chunked: SIZE\r\nDATA\r\n ... 0\r\n\r\n.
    for (;;) {
      size_t line_end;
      while ((line_end = raw.find("\r\n")) == std::string::npos) {
        ASSIGN_OR_RETURN(const size_t n, conn->Read(&raw, deadline));
        if (n == 0) return Status::Unavailable("the stream ended inside a chunk header");
      }
      const size_t size = std::strtoull(raw.c_str(), nullptr, 16);
      raw.erase(0, line_end + 2);
      if (size == 0) return Status::Ok();
      while (raw.size() < size + 2) {
        ASSIGN_OR_RETURN(const size_t n, conn->Read(&raw, deadline));
        if (n == 0) return Status::Unavailable("the stream ended inside a chunk");
      }
      on_body(raw.substr(0, size));
      raw.erase(0, size + 2);
    }
  }
  int status() const { return status_; }

 private:
  int status_ = 0;
};

std::string Request(const Endpoint& e, const std::string& method, const std::string& path,
                    const std::string& body) {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: " + e.host + ":" + std::to_string(e.port) +
                  "\r\nConnection: close\r\nAccept: text/event-stream, application/json\r\n";
  if (!e.api_key.empty()) r += "Authorization: Bearer " + e.api_key + "\r\n";
  if (method == "POST") {
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return r + "\r\n" + body;
}

std::vector<double> Field(const std::vector<const RequestResult*>& ok, double RequestResult::*f) {
  std::vector<double> v;
  for (const RequestResult* r : ok) v.push_back(r->*f);
  return v;
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double Std(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = Mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

void AddStats(const std::string& name, std::vector<double> seconds, Json* out) {
  for (double& x : seconds) x *= 1e3;
  (*out)["mean_" + name + "_ms"] = Mean(seconds);
  (*out)["median_" + name + "_ms"] = Median(seconds);
  (*out)["std_" + name + "_ms"] = Std(seconds);
  for (int p : {50, 90, 95, 99})
    (*out)["p" + std::to_string(p) + "_" + name + "_ms"] = Percentile(seconds, p);
}

}  // namespace

std::string Endpoint::CompletionsPath() const {
  const bool has_v1 = prefix.size() >= 3 && prefix.compare(prefix.size() - 3, 3, "/v1") == 0;
  return prefix + (has_v1 ? "" : "/v1") + "/completions";
}

std::string Endpoint::ModelsPath() const {
  const bool has_v1 = prefix.size() >= 3 && prefix.compare(prefix.size() - 3, 3, "/v1") == 0;
  return prefix + (has_v1 ? "" : "/v1") + "/models";
}

StatusOr<Endpoint> ParseEndpoint(const std::string& url, const std::string& api_key) {
  if (url.rfind("https://", 0) == 0) {
    return Status::InvalidArgument("--url " + url +
                                   ": https is not supported by the built-in client (use http, e.g. through "
                                   "kubectl port-forward, or run aiperf: docs/performance.md)");
  }
  if (url.rfind("http://", 0) != 0)
    return Status::InvalidArgument("--url " + url + ": want http://HOST:PORT[/PATH]");
  Endpoint e;
  e.api_key = api_key;
  std::string rest = url.substr(7);
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    e.prefix = rest.substr(slash);
    rest.erase(slash);
    while (!e.prefix.empty() && e.prefix.back() == '/') e.prefix.pop_back();
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || rest.back() == ']') {
    e.host = rest;
    e.port = 80;
  } else {
    e.host = rest.substr(0, colon);
    char* end = nullptr;
    const long p = std::strtol(rest.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || p < 1 || p > 65535) return Status::InvalidArgument("--url " + url + ": bad port");
    e.port = static_cast<uint16_t>(p);
  }
  if (e.host.size() > 2 && e.host.front() == '[' && e.host.back() == ']')
    e.host = e.host.substr(1, e.host.size() - 2);
  if (e.host.empty()) return Status::InvalidArgument("--url " + url + ": no host");
  return e;
}

RequestResult StreamCompletion(const Endpoint& endpoint, const std::string& model,
                               const std::vector<int>& prompt, int max_tokens, double timeout_s) {
  RequestResult r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  const Json body = {{"model", model},
                     {"prompt", prompt},
                     {"max_tokens", max_tokens},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  Connection conn;
  Status s = conn.Open(endpoint.host, endpoint.port);
  if (s.ok()) s = conn.Send(Request(endpoint, "POST", endpoint.CompletionsPath(), body.dump()));
  if (!s.ok()) {
    r.error = s.ToString();
    return r;
  }
  ResponseReader reader;
  std::string pending, error_body;
  double last_text = -1;
  int64_t events = 0, usage_tokens = -1;
  bool done = false;
  s = reader.Read(&conn, deadline, [&](const std::string& data) {
    const double now = Since(start);
    if (reader.status() != 200) {
      if (error_body.size() < 4096) error_body += data;
      return;
    }
    pending += data;
    size_t end;
    // Events end at a blank line; each "data: " line is one JSON chunk or [DONE].
    while ((end = pending.find("\n\n")) != std::string::npos) {
      std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (!event.empty() && event.back() == '\r') event.pop_back();
      if (event.rfind("data:", 0) != 0) continue;
      std::string payload = event.substr(5);
      if (!payload.empty() && payload[0] == ' ') payload.erase(0, 1);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      const Json chunk = Json::parse(payload, nullptr, false);
      if (chunk.is_discarded()) continue;
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        usage_tokens = chunk["usage"].value("completion_tokens", int64_t{-1});
      }
      const Json* choices = chunk.contains("choices") ? &chunk["choices"] : nullptr;
      if (choices == nullptr || !choices->is_array() || choices->empty()) continue;
      const Json& c = (*choices)[0];
      const bool text = c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty();
      // Events with text are what a reader sees arrive; a bare finishing chunk is not a token.
      if (!text) continue;
      ++events;
      if (last_text < 0) {
        r.ttft_s = now;
      } else {
        r.itl.push_back(now - last_text);
      }
      last_text = now;
    }
  });
  r.e2e_s = Since(start);
  if (!s.ok()) {
    r.error = s.ToString();
    return r;
  }
  if (reader.status() != 200) {
    r.error = "HTTP " + std::to_string(reader.status()) + ": " + error_body.substr(0, 512);
    return r;
  }
  if (!done) {
    r.error = "the stream ended without [DONE]";
    return r;
  }
  if (events == 0) {
    r.error = "the stream carried no text";
    return r;
  }
  r.output_tokens = usage_tokens >= 0 ? usage_tokens : events;
  r.ok = true;
  return r;
}

StatusOr<std::string> FirstModel(const Endpoint& endpoint) {
  Connection conn;
  RETURN_IF_ERROR(conn.Open(endpoint.host, endpoint.port));
  RETURN_IF_ERROR(conn.Send(Request(endpoint, "GET", endpoint.ModelsPath(), "")));
  ResponseReader reader;
  std::string body;
  RETURN_IF_ERROR(reader.Read(&conn, Clock::now() + std::chrono::seconds(30), [&](const std::string& d) {
    if (body.size() < (1 << 20)) body += d;
  }));
  if (reader.status() != 200) {
    return Status::Unavailable("GET " + endpoint.ModelsPath() + ": HTTP " + std::to_string(reader.status()) +
                               ": " + body.substr(0, 256));
  }
  const Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string()) {
    return Status::InvalidArgument("GET " + endpoint.ModelsPath() +
                                   ": no model in the answer (use --model-name)");
  }
  return j["data"][0]["id"].get<std::string>();
}

LoadRun RunLoad(const Endpoint& endpoint, const LoadSpec& spec) {
  // Every request is drawn before the clock starts: lengths, prompt ids and (open loop) arrivals.
  std::mt19937_64 rng(spec.seed);
  auto length = [&](int n, double spread) {
    const int lo = std::max(1, static_cast<int>(std::lround(n * (1 - spread))));
    const int hi = std::max(lo, static_cast<int>(std::lround(n * (1 + spread))));
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  struct Planned {
    std::vector<int> prompt;
    int max_tokens = 0;
    double arrival_s = 0;
  };
  std::vector<Planned> plan(static_cast<size_t>(spec.num_requests));
  std::uniform_int_distribution<int> token(10, std::max(11, spec.max_token_id) - 1);
  std::exponential_distribution<double> gap(spec.rate > 0 ? spec.rate : 1.0);
  double t = 0;
  for (Planned& p : plan) {
    p.prompt.resize(static_cast<size_t>(length(spec.prompt_tokens, spec.input_spread)));
    for (int& id : p.prompt) id = token(rng);
    p.max_tokens = length(spec.output_tokens, spec.output_spread);
    if (spec.rate > 0) {
      p.arrival_s = t;
      t += gap(rng);
    }
  }
  LoadRun run;
  run.requests.resize(plan.size());
  const Clock::time_point start = Clock::now();
  auto issue = [&](size_t i) {
    const double at = Since(start);
    RequestResult r =
        StreamCompletion(endpoint, spec.model, plan[i].prompt, plan[i].max_tokens, spec.timeout_s);
    r.start_s = at;
    run.requests[i] = std::move(r);
  };
  std::vector<std::thread> threads;
  if (spec.rate > 0) {
    threads.reserve(plan.size());
    for (size_t i = 0; i < plan.size(); ++i) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(plan[i].arrival_s)));
      threads.emplace_back(issue, i);
    }
  } else {
    std::atomic<size_t> next{0};
    const int workers = std::max(1, std::min(spec.concurrency, spec.num_requests));
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back([&] {
        for (size_t i = next++; i < plan.size(); i = next++) issue(i);
      });
    }
  }
  for (std::thread& th : threads) th.join();
  run.duration_s = Since(start);
  return run;
}

Json Summarize(const LoadRun& run, const Slo& slo) {
  std::vector<const RequestResult*> ok;
  int64_t input = 0, output = 0, good = 0;
  std::vector<double> tpot, itl;
  Json errors = Json::array();
  for (const RequestResult& r : run.requests) {
    if (!r.ok) {
      if (errors.size() < 5) errors.push_back(r.error);
      continue;
    }
    ok.push_back(&r);
    input += r.prompt_tokens;
    output += r.output_tokens;
    const double request_tpot =
        r.output_tokens > 1 ? (r.e2e_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1) : 0;
    if (r.output_tokens > 1) tpot.push_back(request_tpot);
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
    // vLLM's goodput: TTFT, TPOT (its "itl"-style per-token SLO) and e2e, each when given.
    const bool meets = (slo.ttft_s <= 0 || r.ttft_s <= slo.ttft_s) &&
                       (slo.itl_s <= 0 || request_tpot <= slo.itl_s) &&
                       (slo.e2e_s <= 0 || r.e2e_s <= slo.e2e_s);
    good += meets ? 1 : 0;
  }
  const double d = run.duration_s > 0 ? run.duration_s : 1;
  Json s = {{"completed", ok.size()},
            {"failed", run.requests.size() - ok.size()},
            {"duration", run.duration_s},
            {"total_input_tokens", input},
            {"total_output_tokens", output},
            {"request_throughput", static_cast<double>(ok.size()) / d},
            {"output_throughput", static_cast<double>(output) / d},
            {"total_token_throughput", static_cast<double>(input + output) / d},
            {"request_goodput", static_cast<double>(good) / d},
            {"errors", errors}};
  AddStats("ttft", Field(ok, &RequestResult::ttft_s), &s);
  AddStats("tpot", tpot, &s);
  AddStats("itl", itl, &s);
  AddStats("e2el", Field(ok, &RequestResult::e2e_s), &s);
  return s;
}

}  // namespace tandem::tools::bench

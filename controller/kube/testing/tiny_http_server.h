#pragma once
// Test-only: a minimal HTTP/1.1 server on 127.0.0.1:<port 0> with plain POSIX sockets, one thread
// per connection, whose handler writes raw bytes, so transport tests can script exactly what a
// misbehaving API server does (never answer, drop mid-stream, close idle keep-alive connections).

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace tandem::controller::kube::testing {

struct TinyRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

class TinyConnection {
 public:
  explicit TinyConnection(int fd) : fd_(fd) {}
  // Writes all of `data`; false when the peer is gone.
  bool Write(std::string_view data);
  // A complete response with Content-Length.
  bool Respond(int status, std::string_view body, std::string_view extra_headers = "");
  // Starts a chunked response; then WriteChunk() pieces and EndChunks().
  bool StartChunked(int status);
  bool WriteChunk(std::string_view data);
  bool EndChunks();
  // Closes the socket now (the connection loop ends).
  void Close();
  bool closed() const { return closed_; }

 private:
  int fd_;
  bool closed_ = false;
};

class TinyHttpServer {
 public:
  using Handler = std::function<void(const TinyRequest& request, TinyConnection& conn)>;
  // Listens at once; REQUIRES: handler is thread-safe (one thread per connection).
  explicit TinyHttpServer(Handler handler);
  // Unblocks WaitForStop(), shuts every connection down and joins all threads.
  ~TinyHttpServer();

  int port() const { return port_; }
  int connections_accepted() const { return accepted_.load(); }
  int requests_served() const { return requests_.load(); }
  // For handlers that should hang: returns when the server is being destroyed.
  void WaitForStop();
  // Closes every open client connection from the server side (idle keep-alive drop).
  void DropConnections();

 private:
  void AcceptLoop();
  void Serve(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::vector<int> client_fds_;
  std::vector<std::thread> threads_;
  std::thread accept_thread_;
};

}  // namespace tandem::controller::kube::testing

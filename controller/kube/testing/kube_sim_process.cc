#include "controller/kube/testing/kube_sim_process.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TANDEM_KUBE_SIM_PYTHON
#define TANDEM_KUBE_SIM_PYTHON "python3"
#endif
#ifndef TANDEM_KUBE_SIM_SCRIPT
#define TANDEM_KUBE_SIM_SCRIPT "tests/kube-sim/kube_sim.py"
#endif

namespace tandem::controller::kube::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Status WriteAll(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::Internal("cannot write " + path);
  return Status::Ok();
}

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string FindOpenssl() {
  for (const char* candidate : {"/usr/bin/openssl", "/usr/local/bin/openssl", "/bin/openssl"}) {
    if (Executable(candidate)) return candidate;
  }
  return "";
}

// Runs a shell command with output to `log`; Internal with the log tail on failure.
Status Shell(const std::string& command, const std::string& log) {
  const std::string full = command + " >>" + log + " 2>&1";
  if (std::system(full.c_str()) != 0) {
    std::string text = ReadAll(log);
    if (text.size() > 2000) text = text.substr(text.size() - 2000);
    return Status::Internal("`" + command + "` failed: " + text);
  }
  return Status::Ok();
}

// A throwaway CA, a server certificate for 127.0.0.1/localhost and (optionally) a client
// certificate, all signed by the CA, as PEM files in `dir`.
Status MakeCertificates(const std::string& openssl, const std::string& dir, bool client) {
  const std::string log = dir + "/openssl.log";
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  RETURN_IF_ERROR(Shell(openssl + " req -x509" + ec + " -keyout " + dir + "/ca.key -out " + dir +
                            "/ca.crt -days 2 -subj /CN=tandem-test-ca",
                        log));
  RETURN_IF_ERROR(WriteAll(dir + "/server.ext",
                           "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"));
  RETURN_IF_ERROR(WriteAll(dir + "/client.ext", "extendedKeyUsage=clientAuth\n"));
  const std::vector<std::pair<std::string, std::string>> leaves = {
      {"server", "/CN=kube-sim"}, {"client", "/CN=tandem-test/O=system:masters"}};
  for (const auto& [name, subject] : leaves) {
    if (name == "client" && !client) continue;
    const std::string base = dir + "/" + name;
    RETURN_IF_ERROR(Shell(
        openssl + " req" + ec + " -keyout " + base + ".key -out " + base + ".csr -subj " + subject, log));
    RETURN_IF_ERROR(Shell(openssl + " x509 -req -in " + base + ".csr -CA " + dir + "/ca.crt -CAkey " + dir +
                              "/ca.key -CAcreateserial -days 2 -out " + base + ".crt -extfile " + base +
                              ".ext",
                          log));
  }
  return Status::Ok();
}

std::string Kubeconfig(const std::string& server, const std::string& dir, const KubeSimOptions& o) {
  std::ostringstream y;
  y << "apiVersion: v1\nkind: Config\ncurrent-context: kube-sim\n"
    << "clusters:\n- name: kube-sim\n  cluster:\n    server: " << server << "\n";
  if (o.tls) y << "    certificate-authority: " << dir << "/ca.crt\n";
  y << "users:\n- name: tester\n  user:";
  if (!o.token.empty()) {
    y << "\n    token: " << o.token << "\n";
  } else if (o.tls && o.client_cert) {
    y << "\n    client-certificate: " << dir << "/client.crt\n    client-key: " << dir << "/client.key\n";
  } else {
    y << " {}\n";
  }
  y << "contexts:\n- name: kube-sim\n  context:\n    cluster: kube-sim\n    user: tester\n    namespace: "
       "default\n";
  return y.str();
}

}  // namespace

StatusOr<std::unique_ptr<KubeSimProcess>> KubeSimProcess::Start(const KubeSimOptions& options) {
  const std::string python = TANDEM_KUBE_SIM_PYTHON;
  const std::string script = TANDEM_KUBE_SIM_SCRIPT;
  if (!Executable(python)) return Status::Unavailable("no Python interpreter at " + python);
  if (!std::filesystem::exists(script)) return Status::Unavailable("no kube-sim script at " + script);
  const std::string openssl = options.tls ? FindOpenssl() : "";
  if (options.tls && openssl.empty()) return Status::Unavailable("no openssl CLI for the test certificates");

  std::string tmpl = (std::filesystem::temp_directory_path() / "kube-sim-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return Status::Internal("mkdtemp failed");
  std::unique_ptr<KubeSimProcess> sim(new KubeSimProcess());
  sim->dir_ = tmpl;
  if (options.tls) RETURN_IF_ERROR(MakeCertificates(openssl, sim->dir_, options.client_cert));

  const std::string port_file = sim->dir_ + "/port";
  std::vector<std::string> args = {python, script, "--port", "0", "--port-file", port_file};
  if (options.tls) {
    for (const char* a : {"--tls-cert", "server.crt", "--tls-key", "server.key"}) {
      args.push_back(a[0] == '-' ? std::string(a) : sim->dir_ + "/" + a);
    }
    if (options.client_cert) args.insert(args.end(), {"--client-ca", sim->dir_ + "/ca.crt"});
  }
  if (!options.token.empty()) args.insert(args.end(), {"--token", options.token});
  if (!options.faults_json.empty()) args.insert(args.end(), {"--faults", options.faults_json});
  if (options.auto_ready) args.push_back("--auto-ready");
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());

  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log = sim->dir_ + "/kube-sim.log";
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::Internal("cannot open " + log);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  if (pid < 0) return Status::Internal("fork failed");
  sim->pid_ = pid;

  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    const std::string text = ReadAll(port_file);
    if (!text.empty() && text.back() == '\n') {
      sim->port_ = std::atoi(text.c_str());
      break;
    }
    int wstatus = 0;
    if (::waitpid(pid, &wstatus, WNOHANG) == pid) {
      sim->pid_ = -1;
      return Status::Internal("kube-sim exited before listening: " + sim->Log());
    }
    if (std::chrono::steady_clock::now() > give_up) {
      return Status::Internal("kube-sim wrote no port file within 20 s: " + sim->Log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a child's file
  }
  if (sim->port_ <= 0) return Status::Internal("kube-sim port file is malformed");
  sim->server_ = std::string(options.tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(sim->port_);
  sim->kubeconfig_path_ = sim->dir_ + "/kubeconfig";
  RETURN_IF_ERROR(WriteAll(sim->kubeconfig_path_, Kubeconfig(sim->server_, sim->dir_, options)));
  ASSIGN_OR_RETURN(sim->config_, LoadKubeconfig(sim->kubeconfig_path_));
  return sim;
}

std::string KubeSimProcess::Log() const {
  std::string text = ReadAll(dir_ + "/kube-sim.log");
  constexpr size_t kTail = 4000;
  return text.size() > kTail ? text.substr(text.size() - kTail) : text;
}

void KubeSimProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

KubeSimProcess::~KubeSimProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (::waitpid(pid_, nullptr, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > give_up) {
        Kill();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // waiting for a child to exit
    }
    pid_ = -1;
  }
  std::error_code ignored;
  if (!dir_.empty() && std::getenv("TANDEM_KEEP_KUBE_SIM_DIR") == nullptr) {
    std::filesystem::remove_all(dir_, ignored);
  }
}

}  // namespace tandem::controller::kube::testing

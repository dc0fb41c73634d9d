#pragma once
// Where the Kubernetes API server is and how to authenticate to it: kubeconfig files (what kubectl
// reads) and the in-cluster service account. Pure parsing, no network.

#include <string>
#include <string_view>

#include "common/status.h"

namespace tandem::controller::kube {

// Everything the client needs to reach one API server. PEM material is held inline (files named
// by the kubeconfig are read at load time); only the token file is re-read later, because bound
// service-account tokens rotate (see TokenSource).
struct KubeConfig {
  std::string server;                     // "https://10.0.0.1:6443" or "http://127.0.0.1:8080"
  std::string ca_pem;                     // trusted CA bundle; empty: the system's default roots
  bool insecure_skip_tls_verify = false;  // kubeconfig's insecure-skip-tls-verify
  std::string tls_server_name;            // overrides the name checked and sent as SNI
  std::string client_cert_pem;            // client certificate (chain), with client_key_pem
  std::string client_key_pem;
  std::string token;       // static bearer token (kubeconfig user.token)
  std::string token_file;  // bearer token re-read from this file (tokenFile / service account)
  std::string default_namespace = "default";
  std::string source;  // "kubeconfig /path (context ctx)" or "in-cluster", for messages
};

// Reads a kubeconfig file and resolves one context: `context` when non-empty, else the file's
// current-context. Supports cluster.server, certificate-authority(-data), insecure-skip-tls-verify,
// tls-server-name, user.client-certificate(-data), client-key(-data), token, tokenFile, and the
// context's namespace. Relative file paths are relative to the kubeconfig's directory.
// Errors (InvalidArgument / NotFound) name the file and the key, e.g.
// "kubeconfig /k: users[dev].client-key-data: invalid base64". Auth providers and exec plugins
// are not supported (InvalidArgument naming them).
StatusOr<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

// Same, from text already in memory; `path` is used for messages and relative file paths.
StatusOr<KubeConfig> ParseKubeconfig(std::string_view yaml_text, const std::string& path,
                                     const std::string& context = "");

// Where in-cluster configuration comes from; tests point the paths at a temporary directory and
// fill host/port instead of touching the process environment.
struct InClusterSource {
  std::string service_host;  // KUBERNETES_SERVICE_HOST
  std::string service_port;  // KUBERNETES_SERVICE_PORT
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
};

// The source a pod sees: host and port from the environment, the standard mount paths.
InClusterSource InClusterSourceFromEnvironment();

// Config for a pod's service account: https://host:port (IPv6 hosts bracketed), CA from ca_file,
// token re-read from token_file, namespace from namespace_file (default "default" when absent).
// FailedPrecondition when host/port are unset (not running in a cluster); NotFound naming the
// file when the token or CA is missing.
StatusOr<KubeConfig> InClusterConfig(const InClusterSource& source);
StatusOr<KubeConfig> InClusterConfig();

// The config kubectl and controller-runtime would pick: `flag_path` when non-empty, else the first
// file of $KUBECONFIG (colon-separated; files are not merged), else ~/.kube/config when it
// exists, else in-cluster.
StatusOr<KubeConfig> LoadDefault(const std::string& flag_path = "");

}  // namespace tandem::controller::kube

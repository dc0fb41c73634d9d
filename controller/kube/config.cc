#include "controller/kube/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "common/base64.h"

namespace tandem::controller::kube {
namespace {

StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(what + ": cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::NotFound(what + ": error reading " + path);
  return text.str();
}

std::string Resolve(const std::string& base_dir, const std::string& file) {
  if (file.empty() || std::filesystem::path(file).is_absolute()) return file;
  return (std::filesystem::path(base_dir) / file).string();
}

// Finds `name` in a kubeconfig list of {name, <section>: {...}}; nullopt when absent.
std::optional<YAML::Node> FindNamed(const YAML::Node& list, const std::string& name,
                                    const std::string& section) {
  if (!list || !list.IsSequence()) return std::nullopt;
  for (const YAML::Node& entry : list) {
    if (entry.IsMap() && entry["name"] && entry["name"].IsScalar() &&
        entry["name"].as<std::string>() == name) {
      return entry[section];
    }
  }
  return std::nullopt;
}

std::string Str(const YAML::Node& map, const char* key) {
  const YAML::Node v = map[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

// `<key>-data` (base64) wins over `<key>` (a file). `where` is e.g. "users[dev]".
StatusOr<std::string> PemField(const YAML::Node& map, const std::string& key, const std::string& where,
                               const std::string& base_dir, const std::string& file) {
  const std::string data = Str(map, (key + "-data").c_str());
  if (!data.empty()) {
    std::string decoded;
    if (!Base64Decode(data, &decoded)) {
      return Status::InvalidArgument("kubeconfig " + file + ": " + where + "." + key +
                                     "-data: invalid base64");
    }
    return decoded;
  }
  const std::string path = Str(map, key.c_str());
  if (path.empty()) return std::string();
  return ReadFile(Resolve(base_dir, path), "kubeconfig " + file + ": " + where + "." + key);
}

StatusOr<KubeConfig> ParseNode(const YAML::Node& root, const std::string& path, const std::string& context) {
  const std::string err = "kubeconfig " + path + ": ";
  if (!root || !root.IsMap()) return Status::InvalidArgument(err + "not a YAML mapping");
  const std::string context_name = context.empty() ? Str(root, "current-context") : context;
  if (context_name.empty())
    return Status::InvalidArgument(err + "current-context: not set and no context given");
  const YAML::Node ctx = FindNamed(root["contexts"], context_name, "context").value_or(YAML::Node());
  if (!ctx.IsMap()) return Status::NotFound(err + "contexts[" + context_name + "]: no such context");

  const std::string base_dir = std::filesystem::path(path).parent_path().string();
  KubeConfig config;
  config.source = "kubeconfig " + path + " (context " + context_name + ")";
  const std::string ns = Str(ctx, "namespace");
  if (!ns.empty()) config.default_namespace = ns;

  const std::string cluster_name = Str(ctx, "cluster");
  const std::string cluster_where = "clusters[" + cluster_name + "]";
  if (cluster_name.empty()) {
    return Status::InvalidArgument(err + "contexts[" + context_name + "].cluster: not set");
  }
  const YAML::Node cluster = FindNamed(root["clusters"], cluster_name, "cluster").value_or(YAML::Node());
  if (!cluster.IsMap()) return Status::NotFound(err + cluster_where + ": no such cluster");
  config.server = Str(cluster, "server");
  if (config.server.empty()) return Status::InvalidArgument(err + cluster_where + ".server: not set");
  ASSIGN_OR_RETURN(config.ca_pem, PemField(cluster, "certificate-authority", cluster_where, base_dir, path));
  const std::string insecure = Str(cluster, "insecure-skip-tls-verify");
  if (!insecure.empty() && insecure != "true" && insecure != "false") {
    return Status::InvalidArgument(err + cluster_where +
                                   ".insecure-skip-tls-verify: not a boolean: " + insecure);
  }
  config.insecure_skip_tls_verify = insecure == "true";
  config.tls_server_name = Str(cluster, "tls-server-name");

  const std::string user_name = Str(ctx, "user");
  if (user_name.empty()) return config;  // anonymous
  const std::string user_where = "users[" + user_name + "]";
  const std::optional<YAML::Node> found_user = FindNamed(root["users"], user_name, "user");
  if (!found_user) return Status::NotFound(err + user_where + ": no such user");
  const YAML::Node user = *found_user;
  if (!user || user.IsNull()) return config;
  if (!user.IsMap()) return Status::InvalidArgument(err + user_where + ": not a mapping");
  for (const char* unsupported : {"auth-provider", "exec", "username"}) {
    if (user[unsupported]) {
      return Status::InvalidArgument(err + user_where + "." + unsupported +
                                     ": not supported (use a token, tokenFile or client certificate)");
    }
  }
  ASSIGN_OR_RETURN(config.client_cert_pem, PemField(user, "client-certificate", user_where, base_dir, path));
  ASSIGN_OR_RETURN(config.client_key_pem, PemField(user, "client-key", user_where, base_dir, path));
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return Status::InvalidArgument(err + user_where +
                                   ": client-certificate and client-key must be given together");
  }
  config.token = Str(user, "token");
  const std::string token_file = Str(user, "tokenFile");
  if (!token_file.empty()) {
    config.token_file = Resolve(base_dir, token_file);
    // Fail at load time on a missing file, like kubectl; later reads pick up rotations.
    ASSIGN_OR_RETURN(std::string ignored, ReadFile(config.token_file, err + user_where + ".tokenFile"));
    (void)ignored;
  }
  return config;
}

}  // namespace

StatusOr<KubeConfig> ParseKubeconfig(std::string_view yaml_text, const std::string& path,
                                     const std::string& context) {
  try {
    return ParseNode(YAML::Load(std::string(yaml_text)), path, context);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("kubeconfig " + path + ": " + e.what());
  }
}

StatusOr<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, "kubeconfig"));
  return ParseKubeconfig(text, path, context);
}

InClusterSource InClusterSourceFromEnvironment() {
  InClusterSource source;
  if (const char* host = std::getenv("KUBERNETES_SERVICE_HOST")) source.service_host = host;
  if (const char* port = std::getenv("KUBERNETES_SERVICE_PORT")) source.service_port = port;
  return source;
}

StatusOr<KubeConfig> InClusterConfig(const InClusterSource& source) {
  if (source.service_host.empty() || source.service_port.empty()) {
    return Status::FailedPrecondition(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set (not in a pod?)");
  }
  KubeConfig config;
  config.source = "in-cluster";
  const bool ipv6 = source.service_host.find(':') != std::string::npos;
  config.server =
      "https://" + (ipv6 ? "[" + source.service_host + "]" : source.service_host) + ":" + source.service_port;
  ASSIGN_OR_RETURN(config.ca_pem, ReadFile(source.ca_file, "in-cluster config: service account CA"));
  ASSIGN_OR_RETURN(std::string token,
                   ReadFile(source.token_file, "in-cluster config: service account token"));
  config.token_file = source.token_file;
  StatusOr<std::string> ns = ReadFile(source.namespace_file, "in-cluster config: namespace");
  if (ns.ok()) {
    std::string value = ns.value();
    while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) value.pop_back();
    if (!value.empty()) config.default_namespace = value;
  }
  return config;
}

StatusOr<KubeConfig> InClusterConfig() { return InClusterConfig(InClusterSourceFromEnvironment()); }

StatusOr<KubeConfig> LoadDefault(const std::string& flag_path) {
  if (!flag_path.empty()) return LoadKubeconfig(flag_path);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    std::string list(env);
    std::string first = list.substr(0, list.find(':'));
    if (!first.empty()) return LoadKubeconfig(first);
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    const std::string path = std::string(home) + "/.kube/config";
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) return LoadKubeconfig(path);
  }
  return InClusterConfig();
}

}  // namespace tandem::controller::kube

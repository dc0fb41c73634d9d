#pragma once
// A throwaway private PKI for `tandem local --tls`: a CA and one certificate it signed, which every
// agent of the stack presents both as a server and as a client (mutual TLS on the gRPC hops), as
// cert-manager's Secret would give each pod in a cluster (docs/security.md).

#include <string>

#include "common/status.h"

namespace tandem::tools {

struct LocalPki {
  std::string ca_file;    // DIR/ca.crt: the CA certificate peers must chain to
  std::string cert_file;  // DIR/tls.crt: the agents' certificate
  std::string key_file;   // DIR/tls.key: its private key (mode 0600)
};

// Writes ca.crt, tls.crt and tls.key (the file names of a kubernetes.io/tls Secret with its CA)
// into `dir` (created 0700 when missing): ECDSA P-256 keys, SHA-256 signatures, valid from a
// minute ago for `days` days. The certificate names `server_name` (DNS SAN) and 127.0.0.1 (IP SAN)
// and may serve and call (extendedKeyUsage serverAuth, clientAuth). The CA's key is not kept.
StatusOr<LocalPki> MakeLocalPki(const std::string& dir, const std::string& server_name, int days = 7);

// The files of a kubernetes.io/tls Secret mounted or copied at `dir` (ca.crt, tls.crt, tls.key);
// NotFound naming the first one missing.
StatusOr<LocalPki> LocalPkiIn(const std::string& dir);

}  // namespace tandem::tools

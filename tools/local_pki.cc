#include "tools/local_pki.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

namespace tandem::tools {
namespace {

namespace fs = std::filesystem;

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

// The error OpenSSL queued for `what`, as a Status.
Status OpenSslError(const std::string& what) {
  char buf[256] = "unknown error";
  const unsigned long e = ERR_get_error();
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return Status::Internal("tls: " + what + ": " + buf);
}

StatusOr<Key> NewKey() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("generating a P-256 key");
  return key;
}

// One X.509 v3 extension from its OpenSSL config text, added to `cert` (issuer `issuer`).
bool AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key` named CN=`common_name`, signed by `issuer_key` (issuer `issuer`, or
// itself when null), with `extensions` (nid, config text).
StatusOr<Cert> NewCert(EVP_PKEY* key, const std::string& common_name, X509* issuer, EVP_PKEY* issuer_key,
                       int days, const std::vector<std::pair<int, std::string>>& extensions) {
  Cert cert(X509_new());
  if (!cert) return OpenSslError("X509_new");
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return OpenSslError("a random serial number");
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  const bool serial_ok =
      bn != nullptr && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get())) != nullptr;
  BN_free(bn);
  X509_NAME* name = X509_get_subject_name(cert.get());
  const bool ok =
      serial_ok && X509_set_version(cert.get(), 2) == 1 &&
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60) != nullptr &&
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 86400) != nullptr &&
      X509_set_pubkey(cert.get(), key) == 1 &&
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                                 0) == 1 &&
      X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name) == 1;
  if (!ok) return OpenSslError("filling in the certificate for " + common_name);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  for (const auto& [nid, value] : extensions) {
    if (!AddExtension(cert.get(), signer, nid, value)) return OpenSslError("extension " + value);
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) <= 0) return OpenSslError("signing " + common_name);
  return cert;
}

// Writes PEM text made by `write` to `path` with `mode`, replacing whatever was there.
template <typename Write>
Status WritePem(const std::string& path, mode_t mode, Write write) {
  std::error_code ec;
  fs::remove(path, ec);
  const mode_t old = umask(0777 & ~mode);
  std::unique_ptr<BIO, BioFree> bio(BIO_new_file(path.c_str(), "w"));
  umask(old);
  if (!bio) return Status::Unavailable("tls: cannot write " + path);
  if (!write(bio.get())) return OpenSslError("writing " + path);
  return Status::Ok();
}

}  // namespace

StatusOr<LocalPki> MakeLocalPki(const std::string& dir, const std::string& server_name, int days) {
  if (server_name.empty() || server_name.find_first_of(",:= ") != std::string::npos) {
    return Status::InvalidArgument("tls: server name '" + server_name + "' is not a DNS name");
  }
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return Status::Unavailable("tls: cannot create " + dir + ": " + ec.message());
    fs::permissions(dir, fs::perms::owner_all, ec);
  }
  ASSIGN_OR_RETURN(Key ca_key, NewKey());
  ASSIGN_OR_RETURN(Cert ca, NewCert(ca_key.get(), "tandem local CA", nullptr, ca_key.get(), days,
                                    {{NID_basic_constraints, "critical,CA:TRUE"},
                                     {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                     {NID_subject_key_identifier, "hash"}}));
  ASSIGN_OR_RETURN(Key key, NewKey());
  ASSIGN_OR_RETURN(Cert cert, NewCert(key.get(), server_name, ca.get(), ca_key.get(), days,
                                      {{NID_basic_constraints, "critical,CA:FALSE"},
                                       {NID_key_usage, "critical,digitalSignature"},
                                       {NID_ext_key_usage, "serverAuth,clientAuth"},
                                       {NID_subject_alt_name, "DNS:" + server_name + ",IP:127.0.0.1"},
                                       {NID_authority_key_identifier, "keyid:always"}}));
  LocalPki pki{dir + "/ca.crt", dir + "/tls.crt", dir + "/tls.key"};
  RETURN_IF_ERROR(WritePem(pki.ca_file, 0644, [&](BIO* b) { return PEM_write_bio_X509(b, ca.get()) == 1; }));
  RETURN_IF_ERROR(
      WritePem(pki.cert_file, 0644, [&](BIO* b) { return PEM_write_bio_X509(b, cert.get()) == 1; }));
  RETURN_IF_ERROR(WritePem(pki.key_file, 0600, [&](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
  }));
  return pki;
}

StatusOr<LocalPki> LocalPkiIn(const std::string& dir) {
  LocalPki pki{dir + "/ca.crt", dir + "/tls.crt", dir + "/tls.key"};
  for (const std::string* f : {&pki.ca_file, &pki.cert_file, &pki.key_file}) {
    std::error_code ec;
    if (!fs::is_regular_file(*f, ec)) {
      return Status::NotFound("tls: " + *f + " is missing (--tls-dir wants ca.crt, tls.crt and tls.key)");
    }
  }
  return pki;
}

}  // namespace tandem::tools

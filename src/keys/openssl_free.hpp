#pragma once
// unique_ptr deleters for the OpenSSL objects the JWT and JWKS code owns (one set, shared).

#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/params.h>

namespace floodgate::keys {

// Calls OpenSSL's `free` for its type: std::unique_ptr<BIGNUM, BnFree>.
template <auto release>
struct OpenSslFree {
  template <class T>
  void operator()(T* p) const {
    release(p);
  }
};
using MdCtxFree = OpenSslFree<EVP_MD_CTX_free>;
using SigFree = OpenSslFree<ECDSA_SIG_free>;
using BnFree = OpenSslFree<BN_free>;
using PkeyFree = OpenSslFree<EVP_PKEY_free>;
using CtxFree = OpenSslFree<EVP_PKEY_CTX_free>;
using BldFree = OpenSslFree<OSSL_PARAM_BLD_free>;
using ParamFree = OpenSslFree<OSSL_PARAM_free>;

}  // namespace floodgate::keys

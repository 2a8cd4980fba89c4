#ifndef SECURESTORE_CLIBCRYPTO_SHIM_H
#define SECURESTORE_CLIBCRYPTO_SHIM_H
// OpenSSL's libcrypto (pkg-config libcrypto, Debian's libssl-dev): the library SQLCipher itself encrypts with
// (ldd libsqlcipher.so.0 shows libcrypto.so.3). SecureStore calls only its EVP SHA-256 digest, for the
// digests of attachments; no cryptography is written here.
#include <openssl/evp.h>
#endif

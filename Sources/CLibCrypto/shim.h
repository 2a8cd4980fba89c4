#ifndef SECURESTORE_CLIBCRYPTO_SHIM_H
#define SECURESTORE_CLIBCRYPTO_SHIM_H
// OpenSSL's libcrypto (pkg-config libcrypto, Debian's libssl-dev): the library SQLCipher itself encrypts with
// (ldd libsqlcipher.so.0 shows libcrypto.so.3). SecureStore calls its EVP SHA-256 digest (attachments' digests),
// scrypt and AES-256-GCM (the key file), and HMAC-SHA1 with PBKDF2 (naming the page of a SQLCipher file that fails
// its authentication); no cryptography is written here.
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

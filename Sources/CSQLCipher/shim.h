#ifndef SECURESTORE_CSQLCIPHER_SHIM_H
#define SECURESTORE_CSQLCIPHER_SHIM_H
// SQLCipher (pkg-config sqlcipher). SQLITE_HAS_CODEC must be defined before the header,
// or sqlite3_key and sqlite3_rekey are not declared.
#define SQLITE_HAS_CODEC 1
#include <sqlcipher/sqlite3.h>

// SQLITE_TRANSIENT is a macro that casts -1 to a destructor pointer: Swift cannot import it.
static inline sqlite3_destructor_type securestore_sqlite_transient(void) { return SQLITE_TRANSIENT; }
#endif

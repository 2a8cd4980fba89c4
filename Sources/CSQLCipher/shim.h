#ifndef SECURESTORE_CSQLCIPHER_SHIM_H
#define SECURESTORE_CSQLCIPHER_SHIM_H
// SQLCipher (pkg-config sqlcipher). SQLITE_HAS_CODEC must be defined before the header,
// or sqlite3_key and sqlite3_rekey are not declared.
#define SQLITE_HAS_CODEC 1
#include <sqlcipher/sqlite3.h>

// SQLITE_TRANSIENT is a macro that casts -1 to a destructor pointer: Swift cannot import it.
static inline sqlite3_destructor_type securestore_sqlite_transient(void) { return SQLITE_TRANSIENT; }

// sqlite3_db_config is variadic: Swift cannot call it. SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE (SQLite 3.16+) is not in
// SQLCipher 3.4's header, so its number is given here; older libraries answer SQLITE_ERROR and change nothing.
#define SECURESTORE_DBCONFIG_NO_CKPT_ON_CLOSE 1006
// SQLITE_DBCONFIG_DQS_DML / _DQS_DDL (SQLite 3.29+) turn off the reading of an unknown "identifier" as a string
// literal; SQLCipher 3.4's header has neither, and its 3.15.2 cannot turn the misfeature off.
#define SECURESTORE_DBCONFIG_DQS_DML 1013
#define SECURESTORE_DBCONFIG_DQS_DDL 1014
static inline int securestore_db_config_flag(sqlite3 *db, int op, int value) {
    return sqlite3_db_config(db, op, value, (int *)0);
}
#endif

#ifndef SECURESTORE_CSQLITE3_SHIM_H
#define SECURESTORE_CSQLITE3_SHIM_H
// Plain SQLite (pkg-config sqlite3), for the benchmark baseline executable only. It must never be linked
// into a process that also links SQLCipher: both export the same sqlite3_* symbols.
#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro that casts -1 to a destructor pointer: Swift cannot import it.
static inline sqlite3_destructor_type bench_sqlite_transient(void) { return SQLITE_TRANSIENT; }
#endif

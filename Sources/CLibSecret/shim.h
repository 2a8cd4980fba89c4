#ifndef SECURESTORE_CLIBSECRET_SHIM_H
#define SECURESTORE_CLIBSECRET_SHIM_H
// libsecret, the freedesktop Secret Service client library (pkg-config libsecret-1).
// Swift calls the non-variadic functions directly; nothing is wrapped here.
// The D-Bus path functions (secret-paths.h) are marked unstable by libsecret, but they are the ones
// that let a lookup cost two round trips scoped to one collection (search, get secret) instead of
// building a proxy object per item; they have not changed since libsecret 0.18.
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>
#endif

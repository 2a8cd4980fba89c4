#ifndef SECURESTORE_CLIBSECRET_SHIM_H
#define SECURESTORE_CLIBSECRET_SHIM_H
// libsecret, the freedesktop Secret Service client library (pkg-config libsecret-1).
// Swift calls the non-variadic functions directly (the ...v_sync twins and the object API);
// nothing is wrapped here.
#include <libsecret/secret.h>
#endif

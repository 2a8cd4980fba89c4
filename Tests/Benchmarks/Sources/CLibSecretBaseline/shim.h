#ifndef SECURESTORE_BENCH_CLIBSECRET_SHIM_H
#define SECURESTORE_BENCH_CLIBSECRET_SHIM_H
// libsecret's C API for the benchmark baseline (pkg-config libsecret-1): what a C program calls directly.
// Its own module name, because module names must be unique in one build graph and the product's CLibSecret
// is internal to the product.
#include <libsecret/secret.h>
#endif

#ifndef SECURESTORE_CLINUXKEYRING_SHIM_H
#define SECURESTORE_CLINUXKEYRING_SHIM_H
// The Linux kernel's key retention service (keyrings(7)): add_key(2) and keyctl(2), which glibc exposes only
// through the variadic syscall(2) that Swift cannot call. Every argument is passed as a long: syscall(2) reads
// its arguments as longs, and an int (a negative KEY_SPEC_… above all) is not widened in a variadic call. No library is linked (libkeyutils is not needed); these
// are the only C functions here, each one system call.
#include <sys/syscall.h>
#include <unistd.h>
#include <stdint.h>

#define SECURESTORE_KEY_SPEC_SESSION_KEYRING (-3)
#define SECURESTORE_KEY_SPEC_USER_KEYRING (-4)
#define SECURESTORE_KEY_SPEC_USER_SESSION_KEYRING (-5)
#define SECURESTORE_KEYCTL_GET_KEYRING_ID 0
#define SECURESTORE_KEYCTL_SETPERM 5
#define SECURESTORE_KEYCTL_SEARCH 10
#define SECURESTORE_KEYCTL_READ 11
#define SECURESTORE_KEYCTL_SET_TIMEOUT 15
#define SECURESTORE_KEYCTL_INVALIDATE 21

static inline long securestore_add_key(const char *type, const char *description, const void *payload,
                                       size_t length, int32_t keyring) {
    return syscall(SYS_add_key, type, description, payload, (long)length, (long)keyring);
}

/// The id of a special keyring (`keyring` is KEY_SPEC_…), without creating it: negative when there is none.
static inline long securestore_keyctl_get_keyring_id(int32_t keyring) {
    return syscall(SYS_keyctl, (long)SECURESTORE_KEYCTL_GET_KEYRING_ID, (long)keyring, 0L);
}

static inline long securestore_keyctl_search(int32_t keyring, const char *type, const char *description) {
    return syscall(SYS_keyctl, (long)SECURESTORE_KEYCTL_SEARCH, (long)keyring, type, description, 0L);
}

static inline long securestore_keyctl_read(int32_t key, void *buffer, size_t length) {
    return syscall(SYS_keyctl, (long)SECURESTORE_KEYCTL_READ, (long)key, buffer, (long)length);
}

static inline long securestore_keyctl_set_timeout(int32_t key, unsigned int seconds) {
    return syscall(SYS_keyctl, (long)SECURESTORE_KEYCTL_SET_TIMEOUT, (long)key, (long)seconds);
}

static inline long securestore_keyctl_setperm(int32_t key, uint32_t permissions) {
    return syscall(SYS_keyctl, (long)SECURESTORE_KEYCTL_SETPERM, (long)key, (long)permissions);
}

static inline long securestore_keyctl_invalidate(int32_t key) {
    return syscall(SYS_keyctl, (long)SECURESTORE_KEYCTL_INVALIDATE, (long)key);
}
#endif

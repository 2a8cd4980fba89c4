// Keychain module.

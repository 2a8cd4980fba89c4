// SecureStore module.

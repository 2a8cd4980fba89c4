// EncryptedDatabase module.

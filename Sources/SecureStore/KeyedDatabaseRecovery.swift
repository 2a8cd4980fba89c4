internal import Attachments
public import EncryptedDatabase
public import Keychain
internal import SecureStoreCore

// Recovery codes: the current key written for a person, and opening a database whose key item is lost.
extension KeyedDatabase {
    // MARK: Recovery codes

    /// The recovery code of the current key: 14 groups of 4 characters a person can write down (see
    /// ``RecoveryCode``). It *is* the key: show it once, never log or store it in plain text. A key
    /// rotation makes it obsolete.
    public func recoveryCode() throws -> Secret {
        guard let key = try items.key(account: items.currentAccount(id: databaseID)) else {
            throw store.missingKeyError()
        }
        return RecoveryCode.code(for: key)
    }

    /// Stores the key written in a recovery code as the current key of the existing database `name`,
    /// after checking that it opens the database, and opens it. Use it when the keyring item is lost.
    ///
    /// Nothing is stored unless the code is well formed *and* opens the file. A key is never replaced
    /// or deleted: a different current key of the same database is kept as a retired key first.
    ///
    /// - Throws: ``SecureStoreError/Code/invalidRecoveryCode`` for a mistyped code or one that does not open
    ///   the database; ``SecureStoreError/Code/notFound`` when there is no database file;
    ///   ``SecureStoreError/Code/copiedDatabase`` (nothing stored) when the file is a copy of a database that
    ///   still exists at its recorded place: the code would otherwise take over that database's key.
    public static func recover(
        paths: AppPaths, name: String, keychain: Keychain, code: Secret,
        configuration: DatabaseConfiguration = DatabaseConfiguration()
    ) throws -> KeyedDatabase {
        try KeyedStore.validated(paths: paths, name: name, keychain: keychain, configuration: configuration).recover(code: code)
    }
}

extension KeyedStore {
    /// Opens the database with the key written in `code` and stores it as the current key: see
    /// ``KeyedDatabase/recover(paths:name:keychain:code:configuration:)``.
    func recover(code: Secret) throws -> KeyedDatabase {
        let key = try RecoveryCode.key(from: code)
        guard KeyedDatabaseFiles.exists(files.path) || KeyedDatabaseFiles.exists(files.restoreCommitPath) else {
            throw SecureStoreError(
                SecureStoreError.Code.notFound,
                "there is no database '\(name)' at '\(files.path)'; a recovery code restores the key of an existing "
                    + "database file")
        }
        // A failure below drops `lock`, which releases it.
        let lock = try files.lock(exclusive: true, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        try files.finishCommittedRestore()
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: files.path, key: key, configuration: configuration)
        } catch DatabaseError.Code.wrongKeyOrNotADatabase {
            throw SecureStoreError(
                SecureStoreError.Code.invalidRecoveryCode,
                "the recovery code is well formed but does not open '\(files.path)': it belongs to another "
                    + "database, or to a key replaced by a rotation. Nothing was stored")
        }
        let id: String
        do {
            id = try settle(
                queue: queue, key: key, openedWith: KeyedDatabaseKeyItem(account: "", label: ""),
                catalogue: try items.catalogue())
        } catch {
            try? queue.close()
            throw error
        }
        try lock.share(recording: id, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        return KeyedDatabase(store: self, opened: Opened(queue: queue, id: id, lock: lock))
    }
}

extension KeyedDatabase {
    /// The keyring item that holds this database's current key — its service, its account and its value exactly
    /// as stored (64 lowercase hex digits) — for copying it into another store, such as a systemd credential
    /// (`securestore keystore credential --database NAME`): the same item read from there opens the database.
    ///
    /// The value is the key: keep it as carefully as ``recoveryCode()``.
    public func currentKeyItem() throws -> (service: String, account: String, value: Secret) {
        let account = items.currentAccount(id: databaseID)
        guard let value = try items.keychain.secret(service: items.service, account: account) else {
            throw store.missingKeyError()
        }
        return (items.service, account, value)
    }
}

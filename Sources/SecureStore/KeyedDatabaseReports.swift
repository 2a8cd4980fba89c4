// What the keyed database tells a person: where it and its key live, backups and their verification.
public import EncryptedDatabase
public import Foundation
public import Keychain

/// Where a keyed database and its key live. Never contains the key.
public struct KeyedDatabaseInfo: Sendable, Hashable, CustomStringConvertible {
    /// The database name.
    public let name: String
    /// The database file.
    public let path: String
    /// The file's size in bytes, or nil when it does not exist.
    public let fileSize: Int?
    /// The size of its write-ahead log (`-wal`) in bytes, or nil when there is none.
    public let walSize: Int?
    /// The keychain service of the key (`<app>.database-key`).
    public let keyService: String
    /// The keychain account of the current key (the database name).
    public let keyAccount: String
    /// The keychain account of the pending key during a rotation (`<name>.pending`).
    public let pendingKeyAccount: String
    /// The keychain collection (alias) the key is looked up in.
    public let keyCollection: String
    /// Whether the keychain has a current key item (its value is not read).
    public let hasKey: Bool
    /// Whether a rotation was interrupted: a pending key or a rotation copy exists. The next open
    /// finishes or undoes it.
    public let rotationPending: Bool

    /// Whether the database file exists.
    public var exists: Bool { fileSize != nil }

    /// Several `field: value` lines for a person.
    public var description: String {
        var lines = ["database: \(name)", "path: \(path)"]
        lines.append("size: " + (fileSize.map { "\($0) bytes" } ?? "no file"))
        if let walSize { lines.append("write-ahead log: \(walSize) bytes") }
        lines.append(
            "key: keyring service '\(keyService)', account '\(keyAccount)', collection '\(keyCollection)'"
                + (hasKey ? "" : " (missing)"))
        lines.append("rotation pending: " + (rotationPending ? "yes (account '\(pendingKeyAccount)'); the next open finishes it" : "no"))
        return lines.joined(separator: "\n")
    }
}

/// The result of verifying a keyed database or a backup of it: integrity and key check passed.
/// Never contains the key.
public struct KeyedDatabaseVerification: Sendable, Hashable, CustomStringConvertible {
    /// Which stored key opened the file.
    public enum KeyRole: String, Sendable, Hashable {
        /// The current key (`<name>`).
        case current
        /// The pending key of an unfinished rotation (`<name>.pending`).
        case pending
    }

    /// The verified file.
    public let path: String
    /// Its size in bytes.
    public let size: Int
    /// The number of pages (`PRAGMA page_count`).
    public let pageCount: Int
    /// The page size (`PRAGMA cipher_page_size`).
    public let pageSize: Int
    /// The cipher (`PRAGMA cipher`), e.g. `AES-256-CBC`.
    public let cipher: String
    /// Whether each page carries an HMAC (`PRAGMA cipher_use_hmac`).
    public let hmac: Bool
    /// The SQLCipher version that checked it (`PRAGMA cipher_version`), if it answered.
    public let sqlcipherVersion: String?
    /// `PRAGMA user_version`.
    public let userVersion: Int
    /// The number of tables and their total number of rows.
    public let tableCount: Int
    /// The total number of rows in all tables.
    public let rowCount: Int
    /// Which stored key opened it.
    public let key: KeyRole
    /// The whole encryption profile: format, algorithms, SQLCipher and SQLite versions.
    public let encryption: CipherInfo

    /// Several `field: value` lines for a person.
    public var description: String {
        let head = ["path: \(path)", "size: \(size) bytes (\(pageCount) pages of \(pageSize) bytes)"]
        let tail = [
            "key: opens with the stored \(key.rawValue) key", "integrity check: ok",
            "contents: \(tableCount) tables, \(rowCount) rows, user_version \(userVersion)",
        ]
        return (head + encryption.lines + tail).joined(separator: "\n")
    }
}

extension KeyedDatabase {
    // MARK: Info

    /// Where the database `name` and its key live, whether or not it exists or opens. Reads no key.
    public static func info(paths: AppPaths, name: String, keychain: Keychain) throws -> KeyedDatabaseInfo {
        try validate(name: name)
        let files = KeyedDatabaseFiles(paths: paths, name: name)
        let items = KeyedDatabaseKeyItems(paths: paths, name: name, keychain: keychain)
        let hasPending = try keychain.exists(service: items.service, account: items.pendingAccount)
        return KeyedDatabaseInfo(
            name: name, path: files.path, fileSize: KeyedDatabaseFiles.size(files.path),
            walSize: KeyedDatabaseFiles.size(files.walPath), keyService: items.service, keyAccount: items.account,
            pendingKeyAccount: items.pendingAccount, keyCollection: keychain.configuration.collection.alias,
            hasKey: try keychain.exists(service: items.service, account: items.account),
            rotationPending: hasPending || !files.rotationLeftovers().isEmpty)
    }

    /// Where this database and its key live. Reads no key.
    public func info() throws -> KeyedDatabaseInfo {
        try Self.info(paths: paths, name: name, keychain: keychain)
    }

    // MARK: Backup and verification

    /// Writes an encrypted copy of the database, under the same key, to the new file `destination`
    /// (mode 0600; missing directories are made 0700), flushes it and verifies it.
    ///
    /// The copy is built under a temporary name beside `destination` and linked into place when
    /// complete: it is never half written and nothing is replaced. It opens with the key that is
    /// current now; after a key rotation, keep the recovery code from before it to open the backup.
    ///
    /// - Throws: ``SecureStoreError/alreadyExists`` when `destination` exists.
    public func backup(to destination: URL) throws -> KeyedDatabaseVerification {
        if KeyedDatabaseFiles.exists(destination.path) {
            throw SecureStoreError(
                SecureStoreError.alreadyExists,
                "'\(destination.path)' already exists; a backup never replaces a file. Choose a new name")
        }
        try withQueue { queue in
            // Under the handle's lock: no rotation of this handle can change the key in between.
            guard let key = try items.current() else { throw Self.missingKeyError(files: files, items: items) }
            try queue.export(to: destination.path, key: key)
        }
        try KeyedDatabaseFiles.syncFile(destination.path)
        return try verifyBackup(at: destination)
    }

    /// Checks that the file at `url` (this database or a backup of it) opens with a stored key of this
    /// database and passes `integrity_check`, and describes it. The file is opened read-only.
    ///
    /// - Throws: ``SecureStoreError/verificationFailed`` with a message saying what is wrong (no stored
    ///   key opens it, damaged, not a database), ``SecureStoreError/notFound`` when it does not exist.
    public func verifyBackup(at url: URL) throws -> KeyedDatabaseVerification {
        try Self.verify(path: url.path, items: items)
    }

    /// Checks this database: see ``verifyBackup(at:)``.
    public func verify() throws -> KeyedDatabaseVerification {
        try Self.verify(path: files.path, items: items)
    }

    static func verify(path: String, items: KeyedDatabaseKeyItems) throws -> KeyedDatabaseVerification {
        guard let size = KeyedDatabaseFiles.size(path) else {
            throw SecureStoreError(SecureStoreError.notFound, "'\(path)' does not exist")
        }
        var candidates: [(KeyedDatabaseVerification.KeyRole, DatabaseKey)] = []
        if let current = try items.current() { candidates.append((.current, current)) }
        if let pending = try items.pending() { candidates.append((.pending, pending)) }
        var configuration = DatabaseConfiguration()
        configuration.readOnly = true
        var opened: (KeyedDatabaseVerification.KeyRole, DatabaseQueue)?
        for (role, key) in candidates {
            do {
                opened = (role, try DatabaseQueue(path: path, key: key, configuration: configuration))
                break
            } catch DatabaseError.wrongKeyOrNotADatabase {
                continue
            } catch let error as DatabaseError {
                throw SecureStoreError(
                    SecureStoreError.verificationFailed, "'\(path)' failed verification: \(error.message)")
            }
        }
        guard let (role, queue) = opened else {
            throw SecureStoreError(
                SecureStoreError.verificationFailed,
                candidates.isEmpty
                    ? "there is no stored key for database '\(items.databaseName)' (\(items.location)) to check '\(path)' with"
                    : "no stored key of database '\(items.databaseName)' opens '\(path)': it is damaged, not a "
                        + "SecureStore database, a copy of another database, or made under a key replaced by a rotation")
        }
        defer { try? queue.close() }
        do {
            try queue.integrityCheck()
        } catch let error as DatabaseError {
            throw SecureStoreError(
                SecureStoreError.verificationFailed,
                "'\(path)' failed the integrity check (\(error.message)); do not rely on it")
        }
        let summary = try contentSummary(queue)
        let encryption = try queue.cipherInfo()
        return try queue.read { db in
            KeyedDatabaseVerification(
                path: path, size: size, pageCount: try db.scalar("PRAGMA page_count", as: Int.self) ?? 0,
                pageSize: try db.scalar("PRAGMA cipher_page_size", as: Int.self) ?? 0,
                cipher: try db.scalar("PRAGMA cipher", as: String.self) ?? "unknown",
                hmac: (try db.scalar("PRAGMA cipher_use_hmac", as: Int.self) ?? 0) != 0,
                sqlcipherVersion: try db.scalar("PRAGMA cipher_version", as: String.self),
                userVersion: summary.userVersion, tableCount: summary.tables.count,
                rowCount: summary.tables.values.reduce(0, +), key: role, encryption: encryption)
        }
    }
}

extension CipherInfo {
    /// The profile as `field: value` lines for a person (`db info`, `db verify`).
    public var lines: [String] {
        [
            "format: \(format.name) (\(format.summary))",
            "cipher: \(cipher), \(pageSize)-byte pages, \(hmacAlgorithm), KDF \(kdfAlgorithm) (raw 256-bit key: "
                + "no key derivation at open)",
            "library: SQLCipher \(sqlcipherVersion), SQLite \(sqliteVersion)",
        ]
    }

    /// The profile as a JSON object for `--json`.
    public var jsonObject: [String: any Sendable] {
        [
            "format": format.name, "cipher": cipher, "pageSize": pageSize, "hmacAlgorithm": hmacAlgorithm,
            "kdfAlgorithm": kdfAlgorithm, "sqlcipherVersion": sqlcipherVersion, "sqliteVersion": sqliteVersion,
            "hmac": hmacAlgorithm != "none", "kdf": "none: raw 256-bit key",
        ]
    }
}

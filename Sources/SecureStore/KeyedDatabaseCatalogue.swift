// The catalogue of an application's database keys: listing them, and pruning retired ones.
internal import Attachments
internal import EncryptedDatabase
public import Foundation
public import Keychain

/// One database key item of an application, as ``KeyedDatabase/keys(paths:keychain:)`` lists it. Never
/// contains the key.
public struct KeyedDatabaseKeyInfo: Sendable, Hashable {
    /// What the item is.
    public enum Role: String, Sendable, Hashable {
        /// The key of a database file (account `<id>@<path>`).
        case current
        /// The new key of an unfinished rotation (`<id>.pending`).
        case pending
        /// A key replaced by a rotation or a recovery, kept for older backups (`<id>.retired.<date>`).
        case retired
        /// An item written by SecureStore 0.1 (`<name>` or `<name>.pending`), kept because it may still
        /// open a database in a folder that has not been opened since the upgrade.
        case legacy
    }

    /// The item's keychain account.
    public let account: String
    /// What the item is.
    public let role: Role
    /// The database id, or nil for a legacy item.
    public let databaseID: String?
    /// The database file the key belongs to (current keys only).
    public let path: String?
    /// Whether that file exists (current keys only; false otherwise).
    public let fileExists: Bool
    /// When the key was retired (retired keys only).
    public let retiredAt: Date?
    /// The label keyring managers show.
    public let label: String
}

extension KeyedDatabase {
    /// Every database key item of the application `paths.app` (service `<app>.database-key`), current
    /// ones first, then pending, retired (oldest first) and legacy ones. Reads no key.
    public static func keys(paths: AppPaths, keychain: Keychain) throws -> [KeyedDatabaseKeyInfo] {
        let items = KeyedDatabaseKeyItems(paths: paths, name: "tasks", keychain: keychain)
        let infos = try items.catalogue().map { item -> KeyedDatabaseKeyInfo in
            switch item.role {
            case .current(let id, let path):
                KeyedDatabaseKeyInfo(
                    account: item.account, role: .current, databaseID: id, path: path,
                    fileExists: KeyedDatabaseFiles.exists(path), retiredAt: nil, label: item.label)
            case .pending(let id):
                KeyedDatabaseKeyInfo(
                    account: item.account, role: .pending, databaseID: id, path: nil, fileExists: false,
                    retiredAt: nil, label: item.label)
            case .retired(let id, _):
                KeyedDatabaseKeyInfo(
                    account: item.account, role: .retired, databaseID: id, path: nil, fileExists: false,
                    retiredAt: item.retiredDate, label: item.label)
            case .legacy, .legacyPending:
                KeyedDatabaseKeyInfo(
                    account: item.account, role: .legacy, databaseID: nil, path: nil, fileExists: false,
                    retiredAt: nil, label: item.label)
            }
        }
        let order: [KeyedDatabaseKeyInfo.Role] = [.current, .pending, .retired, .legacy]
        return infos.sorted { left, right in
            let (l, r) = (order.firstIndex(of: left.role)!, order.firstIndex(of: right.role)!)
            if l != r { return l < r }
            if let a = left.retiredAt, let b = right.retiredAt, a != b { return a < b }
            return left.account < right.account
        }
    }

    /// Deletes the retired keys of application `paths.app` that were retired before `date`, and returns
    /// their accounts. Backups and recovery codes made under those keys stop opening: this is the only
    /// place SecureStore deletes a database key, and only when asked.
    ///
    /// Refuses, deleting nothing, when one of them still opens an existing database file of the
    /// application (a key that SecureStore 0.1 shared between folders).
    ///
    /// - Throws: ``SecureStoreError/Code/keyStillInUse`` naming the database file.
    @discardableResult
    public static func pruneRetiredKeys(paths: AppPaths, keychain: Keychain, before date: Date) throws -> [String] {
        let items = KeyedDatabaseKeyItems(paths: paths, name: "tasks", keychain: keychain)
        let catalogue = try items.catalogue()
        let doomed = catalogue.filter { item in
            guard let retired = item.retiredDate else { return false }
            return retired < date
        }
        guard !doomed.isEmpty else { return [] }
        try items.refuseKeysOpeningOtherDatabases(doomed, catalogue: catalogue, except: nil, noun: "retired key")
        for item in doomed { try items.delete(account: item.account) }
        return doomed.map(\.account)
    }
}

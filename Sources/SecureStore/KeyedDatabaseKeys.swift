// The database key in the Keychain: the catalogue of key items (current, pending, retired, legacy),
// their names, and the hex text form, built and parsed in zeroed buffers (never through String).
internal import Attachments
internal import EncryptedDatabase
internal import Foundation
internal import Keychain
internal import SecureStoreCore
internal import Glibc

/// One database key item of an application, as its account names it (Keys/README.md):
///
/// | account | role |
/// | --- | --- |
/// | `<id>@<path>` | the current key of database `<id>`, whose file is at `<path>` |
/// | `<id>.pending` | the new key of an unfinished rotation of database `<id>` |
/// | `<id>.retired.<date>` | a key the database `<id>` had until `<date>` (a rotation or a recovery replaced it) |
/// | `<name>`, `<name>.pending` | an item written by SecureStore 0.1 (keyed by name only); upgraded on first open |
///
/// `<id>` is 32 lowercase hexadecimal digits, random, kept inside the encrypted file too.
struct KeyedDatabaseKeyItem: Sendable, Hashable {
    enum Role: Sendable, Hashable {
        case current(id: String, path: String)
        case pending(id: String)
        case retired(id: String, date: String)
        case legacy(name: String)
        case legacyPending(name: String)
    }

    let account: String
    let label: String
    let role: Role

    /// The database id the item belongs to, or nil for a legacy item.
    var databaseID: String? {
        switch role {
        case .current(let id, _), .pending(let id), .retired(let id, _): id
        case .legacy, .legacyPending: nil
        }
    }

    /// Whether this is the current key of the database whose file is at `path`.
    func isCurrent(at path: String) -> Bool {
        if case .current(_, path) = role { true } else { false }
    }

    /// The date a retired key was retired, or nil for other items.
    var retiredDate: Date? {
        if case .retired(_, let date) = role { KeyedDatabaseKeyItems.parseRetiredDate(date) } else { nil }
    }

    init(account: String, label: String) {
        self.account = account
        self.label = label
        role = Self.role(of: account)
    }

    static let idLength = 32

    static func isID(_ text: Substring) -> Bool {
        text.utf8.count == idLength
            && text.utf8.allSatisfy { ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f")) }
    }

    static func role(of account: String) -> Role {
        let id = account.prefix(idLength)
        let rest = account.dropFirst(idLength)
        if isID(id) {
            if rest.hasPrefix("@/") { return .current(id: String(id), path: String(rest.dropFirst())) }
            if rest == KeyedDatabaseKeyItems.pendingSuffix { return .pending(id: String(id)) }
            if rest.hasPrefix(KeyedDatabaseKeyItems.retiredInfix) {
                return .retired(id: String(id), date: String(rest.dropFirst(KeyedDatabaseKeyItems.retiredInfix.count)))
            }
        }
        if account.hasSuffix(KeyedDatabaseKeyItems.pendingSuffix) {
            return .legacyPending(name: String(account.dropLast(KeyedDatabaseKeyItems.pendingSuffix.count)))
        }
        return .legacy(name: account)
    }
}

/// The key items of the keyed database `name` at `path` and, for look-ups across databases, every
/// database key item of the application (service `<app>.database-key`).
struct KeyedDatabaseKeyItems: Sendable {
    let keychain: Keychain
    let service: String
    let app: String
    let databaseName: String
    /// The database file's path as items record it: the data directory with symbolic links resolved.
    let path: String

    /// The suffix of a pending key's account.
    static let pendingSuffix = ".pending"
    /// What separates a retired key's database id from its date.
    static let retiredInfix = ".retired."

    init(paths: AppPaths, name: String, keychain: Keychain) {
        self.keychain = keychain
        service = paths.databaseKeyService
        app = paths.app
        databaseName = name
        path = Self.canonicalPath(paths.databaseURL(name: name).path)
    }

    /// `path` with its directory's symbolic links resolved (the directory as given when it does not exist).
    static func canonicalPath(_ path: String) -> String {
        let directory = (path as NSString).deletingLastPathComponent
        let file = (path as NSString).lastPathComponent
        guard let base = resolvedPath(directory) else { return (URL(fileURLWithPath: path).standardizedFileURL.path) }
        return (base == "/" ? "" : base) + "/" + file
    }

    /// A new random database id: 32 lowercase hexadecimal digits (128 bits from the system CSPRNG).
    static func newDatabaseID() -> String {
        var generator = SystemRandomNumberGenerator()
        return hexString((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Where the keys live, for messages: service and collection. Never a key.
    var location: String {
        "service '\(service)', collection '\(keychain.configuration.collection.alias)'"
    }

    func currentAccount(id: String, path: String? = nil) -> String { "\(id)@\(path ?? self.path)" }
    func pendingAccount(id: String) -> String { id + Self.pendingSuffix }
    var legacyAccount: String { databaseName }
    var legacyPendingAccount: String { databaseName + Self.pendingSuffix }

    // MARK: The catalogue

    /// Every database key item of the application, sorted by account. Reads no secret.
    func catalogue() throws -> [KeyedDatabaseKeyItem] {
        try keychain.items(service: service).map { KeyedDatabaseKeyItem(account: $0.account, label: $0.label) }
    }

    /// The key stored in the item with `account`, or nil when there is none.
    func key(account: String) throws -> DatabaseKey? {
        try keychain.secret(service: service, account: account).map { try decode($0, account: account) }
    }

    // MARK: Storing

    /// Stores `key` as the current key of database `id` at ``path`` and reads it back: a provider that
    /// does not return what it was given must be found out before any file depends on it.
    func storeCurrent(_ key: DatabaseKey, id: String) throws {
        try store(key, account: currentAccount(id: id), label: "SecureStore database key: \(app)/\(databaseName) at \(path)")
    }

    /// Stores `key` as the pending key of database `id` and reads it back.
    func storePending(_ key: DatabaseKey, id: String) throws {
        try store(key, account: pendingAccount(id: id), label: "SecureStore database key (rotation pending): \(app)/\(databaseName)")
    }

    /// Keeps `key` as a retired key of database `id` (dated now, UTC), unless a retired item of `id`
    /// already holds it. Returns the retired item's account.
    @discardableResult
    func retire(_ key: DatabaseKey, id: String, catalogue: [KeyedDatabaseKeyItem]) throws -> String {
        for item in catalogue {
            if case .retired(let retiredID, _) = item.role, retiredID == id, try self.key(account: item.account) == key {
                return item.account
            }
        }
        let date = Self.retiredDate(Date())
        var account = id + Self.retiredInfix + date
        var serial = 2
        let taken = Set(catalogue.map(\.account))
        while taken.contains(account) {
            account = id + Self.retiredInfix + date + ".\(serial)"
            serial += 1
        }
        try store(key, account: account, label: "SecureStore database key (retired \(date)): \(app)/\(databaseName)")
        return account
    }

    /// A retirement date as accounts carry it: `2026-11-23T16:15:02Z`.
    static func retiredDate(_ date: Date) -> String { timestampTextInSeconds(date) }

    /// The date of a retired item's date text (its first 20 characters), or nil.
    static func parseRetiredDate(_ text: String) -> Date? { dateFromRFC3339(String(text.prefix(20))) }

    private func store(_ key: DatabaseKey, account: String, label: String) throws {
        if account.utf8.count > Keychain.maximumNameLength {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "the database path '\(path)' is too long to name its key item (at most \(Keychain.maximumNameLength - 33) bytes); use a shorter data directory")
        }
        try keychain.set(Self.hexSecret(key), service: service, account: account, label: label)
        let stored = try keychain.secret(service: service, account: account).flatMap(Self.key(fromHex:))
        guard stored == key else {
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed,
                "the keyring did not give back the database key just stored (service '\(service)', account "
                    + "'\(account)', collection '\(keychain.configuration.collection.alias)'); no database file "
                    + "depends on it yet. Check the Secret Service provider")
        }
    }

    @discardableResult
    func delete(account: String) throws -> Bool {
        try keychain.delete(service: service, account: account)
    }

    private func decode(_ secret: Secret, account: String) throws -> DatabaseKey {
        guard let key = Self.key(fromHex: secret) else {
            throw SecureStoreError(
                SecureStoreError.Code.keyMismatch,
                "the keychain item (service '\(service)', account '\(account)') does not hold a database key "
                    + "(64 hexadecimal digits; it holds \(secret.count) bytes); it was not written by SecureStore")
        }
        return key
    }

    // MARK: Hex text

    /// The key as 64 lowercase hexadecimal digits, written straight into a `Secret`.
    static func hexSecret(_ key: DatabaseKey) -> Secret {
        Secret(count: 2 * DatabaseKey.byteCount) { output in
            _ = key.withUnsafeBytes { bytes in writeHex(bytes, into: output) }
        }
    }

    /// The key in a secret of 64 hexadecimal digits (either case; surrounding white space, such as a
    /// newline added by a tool, is ignored), or nil when it is not one.
    static func key(fromHex secret: Secret) -> DatabaseKey? {
        secret.withUnsafeBytes { text -> DatabaseKey? in
            var start = 0
            var end = text.count
            while start < end, isSpace(text[start]) { start += 1 }
            while end > start, isSpace(text[end - 1]) { end -= 1 }
            guard end - start == 2 * DatabaseKey.byteCount else { return nil }
            return withZeroedBuffer(count: DatabaseKey.byteCount) { bytes -> DatabaseKey? in
                guard readHex(UnsafeRawBufferPointer(rebasing: text[start..<end]), into: bytes) else { return nil }
                return try? DatabaseKey(bytes: bytes)
            }
        }
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0a || byte == 0x0d || byte == 0x09
    }
}

// MARK: - Which keys open which files

extension KeyedDatabaseKeyItems {
    /// The key items of `catalogue` that may open the file at ``path``, most likely first: the current items of this
    /// path and their pending keys, this name's 0.1 items, then every other database key of the application (a moved
    /// file, a copy, an older version of the file under a retired key).
    func candidates(in catalogue: [KeyedDatabaseKeyItem]) -> [KeyedDatabaseKeyItem] {
        var ordered = ownItems(in: catalogue)
        let rest = catalogue.filter { item in !ordered.contains(item) }
        ordered += rest.filter { if case .current = $0.role { true } else { false } }
        ordered += rest.filter { if case .pending = $0.role { true } else { false } }
        ordered += rest.filter { if case .retired = $0.role { true } else { false } }.reversed()
        ordered += rest.filter { $0.databaseID == nil }  // 0.1 items of other names: a renamed 0.1 file
        return ordered
    }

    /// The key items of the database at ``path`` itself, most likely first: its current items and their pending
    /// keys, then this name's 0.1 items.
    func ownItems(in catalogue: [KeyedDatabaseKeyItem]) -> [KeyedDatabaseKeyItem] {
        let here = catalogue.filter { $0.isCurrent(at: path) }
        let hereIDs = Set(here.compactMap(\.databaseID))
        var own = here
        own += catalogue.filter { if case .pending(let id) = $0.role { hereIDs.contains(id) } else { false } }
        own += catalogue.filter { $0.role == .legacy(name: databaseName) }
        own += catalogue.filter { $0.role == .legacyPending(name: databaseName) }
        return own
    }

    /// Makes `key` the current key of database `id` at ``path``: a different current key of `id` is retired first,
    /// then `key` is stored (read back), then current items of `id` at other paths (a moved file's old place, already
    /// retired or equal) are removed. Crash-safe at every step: each intermediate state still has `key` stored and
    /// the replaced key retired.
    func adopt(_ key: DatabaseKey, id: String, catalogue: [KeyedDatabaseKeyItem]) throws {
        let currents = catalogue.filter { if case .current(id, _) = $0.role { true } else { false } }
        var alreadyHere = false
        for item in currents {
            guard let stored = try self.key(account: item.account) else { continue }
            if stored != key {
                try retire(stored, id: id, catalogue: catalogue)
            } else if item.account == currentAccount(id: id) {
                alreadyHere = true
            }
        }
        if !alreadyHere { try storeCurrent(key, id: id) }
        for item in currents where item.account != currentAccount(id: id) {
            try delete(account: item.account)
        }
    }

    /// What stays true while promoting the pending key of database `id` waits for the keyring's approval.
    func promotionState(id: String) -> String {
        "until then the database opens with the pending key (keyring service '\(service)' account "
            + "'\(pendingAccount(id: id))'), and the next open that may ask for the keyring's approval "
            + "finishes the rotation"
    }

    /// Whether the file at `path` exists and is the database `id` (opens read-only with one of its keys
    /// and holds its id). A file that exists but cannot be checked (damaged, locked) counts as holding it:
    /// a key is never taken from a database that might still need it.
    func fileHolds(path: String, id: String, catalogue: [KeyedDatabaseKeyItem]) throws -> Bool {
        guard KeyedDatabaseFiles.exists(path) else { return false }
        let files = KeyedDatabaseFiles(databasePath: path)
        for item in catalogue where item.databaseID == id {
            guard let key = try? self.key(account: item.account) else { continue }
            do {
                guard let recorded = try files.peek(key: key, { try $0.keyedDatabaseID() }) else { continue }
                return recorded == nil || recorded == id
            } catch {
                return true
            }
        }
        return false
    }

    /// The paths of the existing databases (current items of `catalogue` other than `except`) that `key` opens: keys
    /// shared by SecureStore 0.1 between folders. Each file is tried with `key`; no key item of another database is
    /// read (a keyring that asks for approval per item, such as KeePassXC, would ask once per database, and a refusal
    /// there has nothing to do with this rotation). A file that cannot be tried now (damaged, or being rotated) is
    /// left out.
    func databases(openedBy key: DatabaseKey, except path: String, catalogue: [KeyedDatabaseKeyItem]) -> [String] {
        var paths: [String] = []
        for item in catalogue {
            guard case .current(_, let other) = item.role, other != path, !paths.contains(other),
                KeyedDatabaseFiles.exists(other)
            else { continue }
            if (try? KeyedDatabaseFiles(databasePath: other).peek(key: key, { _ in true })) == .some(.some(true)) {
                paths.append(other)
            }
        }
        return paths
    }

    /// Refuses (``SecureStoreError/Code/keyStillInUse``, nothing deleted) when a key of `doomed` opens an existing
    /// database file of the application other than `except`: a key that SecureStore 0.1 shared between folders.
    func refuseKeysOpeningOtherDatabases(
        _ doomed: [KeyedDatabaseKeyItem], catalogue: [KeyedDatabaseKeyItem], except: String?, noun: String = "key"
    ) throws {
        var files: [String] = []
        for item in catalogue {
            if case .current(_, let path) = item.role, path != except, !files.contains(path), KeyedDatabaseFiles.exists(path) {
                files.append(path)
            }
        }
        guard !files.isEmpty else { return }
        for item in doomed {
            guard let key = try self.key(account: item.account) else { continue }
            for path in files where try KeyedDatabaseFiles(databasePath: path).peek(key: key, { _ in true }) == true {
                throw SecureStoreError(
                    SecureStoreError.Code.keyStillInUse,
                    "the \(noun) '\(item.account)' still opens the database '\(path)'; nothing was deleted")
            }
        }
    }
}

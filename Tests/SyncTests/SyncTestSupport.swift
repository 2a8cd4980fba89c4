import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Testing
import TestSupport
@testable import Sync
import Tasks

/// One device: a keyed database of its own throw-away application (its own key items and data directory) in
/// the harness's keyring, with its task list.
final class SyncDevice_ {
    let app = "synctest-\(UUID().uuidString.prefix(8).lowercased())"
    let directory: TemporaryDirectory
    let keychain = Keychain()
    let database: KeyedDatabase
    let tasks: TaskList
    var engine: SyncEngine!

    init() throws {
        try Harness.require()
        directory = try TemporaryDirectory()
        database = try KeyedDatabase(paths: try AppPaths(app: app, dataDirectory: directory.url), name: "tasks", keychain: keychain)
        tasks = try TaskList(database: database)
    }

    deinit {
        try? database.close()
        for service in ["\(app).database-key", "\(app).sync-key", "\(app).sync-signing-key", "\(app).sync-join-key"] {
            for account in (try? keychain.accounts(service: service)) ?? [] { _ = try? keychain.delete(service: service, account: account) }
        }
    }

    /// Sets up a new sync group at `remote`; returns the pairing code.
    func initialize(_ remote: SyncRemote) throws -> Secret {
        let (engine, code) = try SyncEngine.initialize(database: database, remote: remote, tables: ["tasks"])
        self.engine = engine
        try engine.sync()
        return code
    }

    func join(_ remote: SyncRemote, _ code: Secret) throws {
        engine = try SyncEngine.join(database: database, remote: remote, tables: ["tasks"], pairingCode: code)
    }

    @discardableResult
    func sync() throws -> SyncReport { try engine.sync() }

    /// Every task as a line, by ID: what a person would compare.
    func rows() throws -> [String] {
        try database.read { db in
            try db.fetch("SELECT hex(id), title, done, created_at FROM tasks ORDER BY id") { row in
                "\(try row.string(at: 0)) \(try row.string(at: 1)) \(try row.int(at: 2)) \(try row.int64(at: 3))"
            }
        }
    }

    /// The database file's SHA-256 after a checkpoint (what "nothing changed" means).
    func fileDigest() throws -> [UInt8] {
        try database.writeWithoutTransaction { db in try db.checkpoint() }
        return SealedBundle.sha256([UInt8](try Data(contentsOf: database.url)))
    }
}

/// Every ordering of `items`.
func permutations<T>(_ items: [T]) -> [[T]] {
    guard items.count > 1 else { return [items] }
    return items.indices.flatMap { index -> [[T]] in
        var rest = items
        let first = rest.remove(at: index)
        return permutations(rest).map { [first] + $0 }
    }
}

/// Copies `source` to `destination` (files and folders), as a replication engine would deliver it.
func copyTree(_ source: String, to destination: String) throws {
    let manager = FileManager.default
    try manager.createDirectory(atPath: destination, withIntermediateDirectories: true)
    for name in try manager.contentsOfDirectory(atPath: source) {
        let from = source + "/" + name, to = destination + "/" + name
        var isDirectory: ObjCBool = false
        _ = manager.fileExists(atPath: from, isDirectory: &isDirectory)
        if isDirectory.boolValue {
            try copyTree(from, to: to)
        } else if !manager.fileExists(atPath: to) {
            try manager.copyItem(atPath: from, toPath: to)
        }
    }
}

// Deleting a keyed database: its files and attachments go, its keys are retired (or deleted), another database of
// the application is untouched (files hashed, key items listed), a deletion refused while the database is open
// changes nothing, and a deletion killed after its commit marker is finished by the next open or delete.
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import TestSupport
import Testing

/// Every file of the fixture's folder (lock files included) with its bytes.
private func kddSnapshot(_ fixture: KDFixture) -> [String: Data] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: fixture.directory.path)) ?? []
    var snapshot: [String: Data] = [:]
    for name in names { snapshot[name] = kdBytes(fixture.directory.path + "/" + name) ?? Data() }
    return snapshot
}

/// The database `tasks` with rows, one rotation (so it has a retired key), a backup outside the folder and a large
/// attachment (so it has an attachments file); and the database `other` of the same application. Returns the
/// backup's URL.
private func kddTwoDatabases(_ fixture: KDFixture) throws -> URL {
    let database = try fixture.open()
    try kdFill(database)
    let store = database.attachmentStore()
    try store.add(.data(Data(repeating: 7, count: 300_000), name: "photo.bin"), to: attOwner)
    try store.close()
    try database.rotateKey()
    let backup = fixture.directory.deletingLastPathComponent()
        .appendingPathComponent(fixture.app + "-backups", isDirectory: true).appendingPathComponent("tasks.db")
    _ = try database.backup(to: backup)
    try database.close()
    let other = try KeyedDatabase(paths: fixture.paths, name: "other", keychain: fixture.keychain)
    try kdFill(other, rows: 5)
    try other.close()
    return backup
}

@Suite(.serialized) struct KeyedDatabaseDeletionTests {
    @Test func deletingRemovesItsFilesAndAttachmentsRetiresItsKeyAndLeavesTheOtherDatabaseAlone() throws {
        let fixture = try KDFixture()
        let backup = try kddTwoDatabases(fixture)
        defer { try? FileManager.default.removeItem(at: backup.deletingLastPathComponent()) }
        let before = kddSnapshot(fixture)
        #expect(before["tasks.attachments.db"] != nil, "the attachment is kept in the attachments file")
        let accounts = try fixture.accounts()
        let current = try #require(try fixture.currentAccount())
        let id = String(current.prefix(32))
        let otherCurrent = try #require(try fixture.currentAccount(path: fixture.directory.path + "/other.db"))
        let otherKey = try fixture.storedHex(account: otherCurrent)
        let oldRetired = try fixture.retiredAccounts()
        #expect(oldRetired.count == 1)

        let report = try KeyedDatabase.delete(paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        #expect(report.databaseID == id)
        #expect(report.path == fixture.path)
        #expect(report.removedFiles == [fixture.path, fixture.directory.path + "/tasks.attachments.db"])
        #expect(report.deletedAccounts == [current])
        #expect(report.retiredAccounts.count == 1 && report.retiredAccounts[0].hasPrefix(id + ".retired."))
        #expect(report.description.hasPrefix("deleted: \(fixture.path) (database id \(id.prefix(8)))"))

        // What is left: the other database byte for byte, and the emptied lock file.
        let after = kddSnapshot(fixture)
        #expect(after.keys.sorted() == [".other.db.lock", ".tasks.db.lock", "other.db"])
        #expect(after["other.db"] == before["other.db"] && after[".other.db.lock"] == before[".other.db.lock"])
        #expect(after[".tasks.db.lock"] == Data(), "the lock file stays, without the deleted database's id")
        // The keys: the current item went, the old retired key stays, and the current key is kept as a retired key.
        #expect(try fixture.accounts().sorted() == (accounts.filter { $0 != current } + report.retiredAccounts).sorted())
        #expect(try fixture.storedHex(account: otherCurrent) == otherKey)
        #expect(try fixture.storedHex(account: report.retiredAccounts[0])?.count == 64)

        // The name has no database now: an open that may not create says so, and creates nothing.
        expectError(SecureStoreError.Code.notFound) {
            try KeyedDatabase(paths: fixture.paths, name: "tasks", keychain: fixture.keychain, createIfMissing: false)
        }
        // The backup (made under the key current at the deletion) still restores, with the retired key.
        let restored = try KeyedDatabase.restore(from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        #expect(restored.openedWithAccount == report.retiredAccounts[0])
        #expect(restored.asidePath == nil)
        let database = try fixture.open()
        try kdExpectRows(database.queue)
        #expect(try database.attachmentStore().summary().count == 1)
        try database.close()
    }

    @Test func deletingTheKeysTooLeavesNoItemOfTheDatabaseAndItsBackupNeedsTheRecoveryCode() throws {
        let fixture = try KDFixture()
        let backup = try kddTwoDatabases(fixture)
        defer { try? FileManager.default.removeItem(at: backup.deletingLastPathComponent()) }
        let id = String(try #require(try fixture.currentAccount()).prefix(32))
        let code = try {
            let database = try fixture.open()
            defer { try? database.close() }
            return try database.recoveryCode()
        }()
        let others = try fixture.accounts().filter { !$0.hasPrefix(id) }
        #expect(others.count == 1, "the other database's key")

        let report = try KeyedDatabase.delete(paths: fixture.paths, name: "tasks", keychain: fixture.keychain, keys: .delete)
        #expect(report.retiredAccounts.isEmpty)
        #expect(report.deletedAccounts.count == 2, "the current key and the retired key: \(report.deletedAccounts)")
        #expect(try fixture.accounts() == others)
        #expect(kddSnapshot(fixture).keys.sorted() == [".other.db.lock", ".tasks.db.lock", "other.db"])

        expectError(SecureStoreError.Code.missingKey) {
            try KeyedDatabase.restore(from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        }
        let restored = try KeyedDatabase.restore(
            from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain, code: code)
        #expect(restored.openedWithAccount == nil)
    }

    /// Another handle (this process) has it open: refused, and not a byte or an item changes.
    @Test func aDeletionWhileTheDatabaseIsOpenIsRefusedAndChangesNothing() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let before = kddSnapshot(fixture)
        let accounts = try fixture.accounts()
        let message = try #require(expectError(SecureStoreError.Code.inUse) {
            try KeyedDatabase.delete(paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        }?.message)
        #expect(message.contains("is open in another process (or another handle)"))
        #expect(kddSnapshot(fixture) == before)
        #expect(try fixture.accounts() == accounts)
        try kdExpectRows(database.queue)

        // Deleting through a handle while a second handle has it open: refused, and the first handle keeps working.
        let second = try fixture.open()
        expectError(SecureStoreError.Code.inUse) { try database.delete() }
        #expect(try fixture.accounts() == accounts)
        try database.write { db in try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [kdRowCount, "still here"]) }
        #expect(try second.read { try $0.scalar("SELECT count(*) FROM item", as: Int.self) } == kdRowCount + 1)
        try second.close()
        try database.close()
    }

    /// The handle deletes its own database and is closed; later calls say why.
    @Test func aHandleDeletesItsDatabaseAndIsClosed() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        try database.write { db in try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [kdRowCount, "in the -wal"]) }
        #expect(FileManager.default.fileExists(atPath: fixture.path + "-wal"))
        let current = try #require(try fixture.currentAccount())

        let report = try database.delete()
        #expect(report.deletedAccounts == [current])
        #expect(try fixture.files() == [], "no file but the lock file")
        #expect(try fixture.accounts() == report.retiredAccounts)
        let message = try #require(expectError(DatabaseError.Code.misuse) { try database.read { _ in 1 } }?.message)
        #expect(message.contains("its KeyedDatabase deleted the database"), "\(message)")
        try database.close()

        // The name is free: a new database with a new id and key.
        let fresh = try fixture.open()
        #expect(fresh.databaseID != String(current.prefix(32)))
        #expect(try fresh.read { try $0.tableExists("item") } == false)
        try fresh.close()
    }

    @Test func thereIsNoDatabaseToDeleteAndNothingIsCreated() throws {
        let fixture = try KDFixture()
        let message = try #require(expectError(SecureStoreError.Code.notFound) {
            try KeyedDatabase.delete(paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        }?.message)
        #expect(message == "there is no database 'tasks' at '\(fixture.path)'")
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.path))
        #expect(try fixture.accounts().isEmpty)
    }

    /// A deletion killed after its commit marker, as it leaves things: the marker, some files removed, the key items
    /// still there. The next open finishes it (the name then has no database); so does the next delete.
    @Test(arguments: [false, true])
    func aDeletionKilledAfterItsMarkerIsFinishedByTheNextOpenOrDelete(byDelete: Bool) throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let store = database.attachmentStore()
        try store.add(.data(Data(repeating: 1, count: 300_000), name: "big.bin"), to: attOwner)
        try store.close()
        let id = database.databaseID
        try database.close()
        let other = try KeyedDatabase(paths: fixture.paths, name: "other", keychain: fixture.keychain)
        try other.close()
        let otherFiles = kddSnapshot(fixture).filter { $0.key.contains("other") }
        let otherAccounts = try fixture.accounts().filter { !$0.hasPrefix(id) }
        // Killed after the database file went, before its attachments file and its key items.
        try "\(id) retire\n".write(toFile: fixture.directory.path + "/.tasks.db.deleting", atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(atPath: fixture.path)

        if byDelete {
            let report = try KeyedDatabase.delete(paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
            #expect(report.databaseID == id)
            #expect(report.removedFiles == [fixture.directory.path + "/tasks.attachments.db"])
        } else {
            expectError(SecureStoreError.Code.notFound) {
                try KeyedDatabase(paths: fixture.paths, name: "tasks", keychain: fixture.keychain, createIfMissing: false)
            }
            // The open found no file (and created none); an open that may create finishes the deletion first.
            let fresh = try fixture.open()
            #expect(fresh.databaseID != id)
            #expect(try fresh.attachmentStore().summary().count == 0, "the deleted database's attachments are gone")
            try fresh.close()
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.path + "/.tasks.db.deleting"))
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.path + "/tasks.attachments.db"))
        #expect(try fixture.accounts().filter { $0.hasPrefix(id) }.isEmpty, "the deleted database's current key went")
        #expect(kddSnapshot(fixture).filter { $0.key.contains("other") } == otherFiles)
        #expect(try fixture.accounts().filter { !$0.hasPrefix(id) && !$0.hasSuffix("@" + kdCanonical(fixture.path)) } == otherAccounts)
    }

    /// Every state a kill can leave, planted: before the marker (only the retired copy of the key is new) the database
    /// is intact and opens; from the marker on, whatever was already removed, the next delete finishes the deletion.
    @Test(arguments: ["retired", "marker", "database removed", "files removed", "current key deleted"])
    func everyStateAKilledDeletionLeavesIsFinishedOrHarmless(state: String) throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let store = database.attachmentStore()
        try store.add(.data(Data(repeating: 2, count: 300_000), name: "big.bin"), to: attOwner)
        try store.close()
        let id = database.databaseID
        try database.close()
        let current = try #require(try fixture.currentAccount())
        let key = try #require(try fixture.storedHex())
        let folder = fixture.directory.path
        // What the deletion had done when it was killed.
        let retired = id + ".retired.2026-11-25T23:00:00Z"
        try fixture.keychain.set(key, service: fixture.service, account: retired)
        if state != "retired" {
            try "\(id) retire\n".write(toFile: folder + "/.tasks.db.deleting", atomically: true, encoding: .utf8)
        }
        if ["database removed", "files removed", "current key deleted"].contains(state) {
            try FileManager.default.removeItem(atPath: fixture.path)
        }
        if ["files removed", "current key deleted"].contains(state) {
            try FileManager.default.removeItem(atPath: folder + "/tasks.attachments.db")
        }
        if state == "current key deleted" { try fixture.keychain.delete(service: fixture.service, account: current) }

        if state == "retired" {
            // Before the commit point: the database is as it was, and a deletion run again completes.
            let reopened = try fixture.open()
            try kdExpectRows(reopened.queue)
            #expect(try reopened.attachmentStore().summary().count == 1)
            try reopened.close()
        }
        let report = try KeyedDatabase.delete(paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        #expect(report.databaseID == id)
        #expect(try fixture.files() == [], "only the lock file is left")
        #expect(try fixture.accounts().filter { !$0.contains(".retired.") } == [], "no current or pending key of the database")
        #expect(try fixture.storedHex(account: retired) == key, "the retired copy of its key stays")
        expectError(SecureStoreError.Code.notFound) { try KeyedDatabase.delete(paths: fixture.paths, name: "tasks", keychain: fixture.keychain) }
    }

    /// A key shared by two folders (SecureStore 0.1) still opens the other folder's database: deleting the keys is
    /// refused and nothing changes; retiring them is fine.
    @Test func deletingAKeyThatStillOpensAnotherDatabaseIsRefused() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        try database.close()
        // A second database whose key is the same bytes (as a 0.1 shared item left it).
        let secondPaths = try AppPaths(app: fixture.app, dataDirectory: fixture.directory.appendingPathComponent("second"))
        let second = try KeyedDatabase(paths: secondPaths, name: "tasks", keychain: fixture.keychain)
        let secondID = second.databaseID
        try second.close()
        let key = try #require(try fixture.storedKey())
        try FileManager.default.removeItem(atPath: secondPaths.databaseURL(name: "tasks").path)
        let copy = try DatabaseQueue(path: secondPaths.databaseURL(name: "tasks").path, key: key)
        try copy.close()
        let account = try #require(try fixture.currentAccount(path: secondPaths.databaseURL(name: "tasks").path))
        #expect(account.hasPrefix(secondID))
        try fixture.keychain.set(
            Secret(string: try #require(try fixture.storedHex())), service: fixture.service, account: account)
        let before = kddSnapshot(fixture)
        let accounts = try fixture.accounts()

        let message = try #require(expectError(SecureStoreError.Code.keyStillInUse) {
            try KeyedDatabase.delete(paths: fixture.paths, name: "tasks", keychain: fixture.keychain, keys: .delete)
        }?.message)
        #expect(message.hasSuffix("still opens the database '\(kdCanonical(secondPaths.databaseURL(name: "tasks").path))'; nothing was deleted"))
        #expect(kddSnapshot(fixture) == before)
        #expect(try fixture.accounts() == accounts)
    }
}

// One key per database: the database id inside the file and in the key item, other folders, moved
// files, copies, the upgrade of items written by SecureStore 0.1 (account `<name>`), retired keys.
import EncryptedDatabase
import Foundation
import Glibc
import Keychain
import SecureStore
import TestSupport
import Testing

/// A second data directory of the fixture's application (same app, same database name).
private func kdOtherPaths(_ fixture: KDFixture, _ suffix: String) throws -> AppPaths {
    try AppPaths(app: fixture.app, dataDirectory: fixture.directory.appendingPathComponent(suffix, isDirectory: true))
}

/// Writes a database as SecureStore 0.1 did: the file under `hex`, no id inside, the key in the item
/// `<app>.database-key` / `<name>`.
private func kdMakeLegacy(_ fixture: KDFixture, paths: AppPaths, hex: String, storeItem: Bool = true) throws {
    try FileManager.default.createDirectory(at: paths.dataDirectory, withIntermediateDirectories: true)
    let queue = try DatabaseQueue(path: paths.databaseURL(name: fixture.name).path, key: try kdKey(hex: hex))
    try queue.write { db in
        try db.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        for index in 0..<kdRowCount {
            try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [index, kdTitle(index)])
        }
        try db.setUserVersion(7)
    }
    try queue.checkpoint()
    try queue.close()
    if storeItem { try fixture.keychain.set(hex, service: fixture.service, account: fixture.name) }
}

/// The id recorded inside the file at `path`, read with `hex`.
private func kdRecordedID(_ path: String, hex: String) throws -> String? {
    var configuration = DatabaseConfiguration()
    configuration.readOnly = true
    let queue = try DatabaseQueue(path: path, key: try kdKey(hex: hex), configuration: configuration)
    defer { try? queue.close() }
    return try queue.read { db in
        try db.tableExists("securestore_identity")
            ? try db.scalar("SELECT database_id FROM securestore_identity", as: String.self) : nil
    }
}

@Suite(.serialized) struct KeyedDatabaseIdentityTests {
    /// The data loss of 0.1: two folders shared one key item, and rotating in one made the other unreadable.
    @Test func twoFoldersHaveTwoKeysAndRotatingOneLeavesTheOtherOpen() throws {
        let fixture = try KDFixture()
        let otherPaths = try kdOtherPaths(fixture, "other")
        let first = try fixture.open()
        try kdFill(first)
        let second = try KeyedDatabase(paths: otherPaths, name: "tasks", keychain: fixture.keychain)
        try kdFill(second)
        #expect(first.databaseID != second.databaseID)
        try second.close()
        let accounts = try fixture.accounts()
        #expect(accounts.count == 2, "one item per database: \(accounts)")
        let otherPath = otherPaths.databaseURL(name: "tasks").path
        let otherHex = try #require(try fixture.storedHex(account: try fixture.currentAccount(path: otherPath)))
        #expect(otherHex != (try fixture.storedHex()))

        try first.rotateKey()
        try first.close()
        #expect(try fixture.storedHex(account: try fixture.currentAccount(path: otherPath)) == otherHex, "untouched")
        let reopened = try KeyedDatabase(paths: otherPaths, name: "tasks", keychain: fixture.keychain)
        try kdExpectRows(reopened.queue)
        try reopened.close()
    }

    @Test func aMovedFileFindsItsKeyAndTheItemFollowsIt() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let id = database.databaseID
        let hex = try #require(try fixture.storedHex())
        try database.close()
        let newPaths = try kdOtherPaths(fixture, "moved")
        try FileManager.default.createDirectory(at: newPaths.dataDirectory, withIntermediateDirectories: true)
        let newPath = newPaths.databaseURL(name: "notes").path
        try FileManager.default.moveItem(atPath: fixture.path, toPath: newPath)

        let moved = try KeyedDatabase(paths: newPaths, name: "notes", keychain: fixture.keychain)
        try kdExpectRows(moved.queue)
        #expect(moved.databaseID == id)
        try moved.close()
        #expect(try fixture.accounts() == [id + "@" + kdCanonical(newPath)], "the item follows the file")
        #expect(try fixture.storedHex(account: id + "@" + kdCanonical(newPath)) == hex, "with the same key")
    }

    /// A copy (same id, another place) while the original is still where its item says: refused, and
    /// neither file nor any item changes — also through a recovery code, the way 0.1 lost the live key.
    @Test func aCopyNeverTakesOverTheOriginalsKey() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let code = try database.recoveryCode()
        try database.close()
        let restorePaths = try kdOtherPaths(fixture, "restore")
        try FileManager.default.createDirectory(at: restorePaths.dataDirectory, withIntermediateDirectories: true)
        let copy = restorePaths.databaseURL(name: "tasks").path
        try FileManager.default.copyItem(atPath: fixture.path, toPath: copy)
        let original = try #require(kdBytes(fixture.path))
        let copied = try #require(kdBytes(copy))
        let accounts = try fixture.accounts()
        let hex = try fixture.storedHex()

        let message = try #require(expectError(SecureStoreError.Code.copiedDatabase) {
            try KeyedDatabase(paths: restorePaths, name: "tasks", keychain: fixture.keychain)
        }?.message)
        #expect(message.hasPrefix("'\(copy)' is a copy of the database at '\(kdCanonical(fixture.path))'"))
        #expect(message.contains("nothing was changed"))
        let recoverMessage = try #require(expectError(SecureStoreError.Code.copiedDatabase) {
            try KeyedDatabase.recover(paths: restorePaths, name: "tasks", keychain: fixture.keychain, code: code)
        }?.message)
        #expect(recoverMessage.contains(kdCanonical(fixture.path)))

        #expect(kdBytes(fixture.path) == original)
        #expect(kdBytes(copy) == copied)
        #expect(try fixture.files() == ["restore", "tasks.db"], "no -wal or -shm was left beside the original")
        #expect(try fixture.accounts() == accounts)
        #expect(try fixture.storedHex() == hex)
        let live = try fixture.open()
        try kdExpectRows(live.queue)
        try live.close()
    }

    /// SecureStore 0.1 named the item by app and name only, so two folders could share it. The first open
    /// of each gives it its own id and item; the 0.1 item stays (it may still open a folder not yet opened).
    @Test func zeroOneItemsAreUpgradedOnFirstOpenOnePerDatabase() throws {
        let fixture = try KDFixture()
        let hex = String(repeating: "4e", count: 32)
        let otherPaths = try kdOtherPaths(fixture, "other")
        try kdMakeLegacy(fixture, paths: fixture.paths, hex: hex)
        try kdMakeLegacy(fixture, paths: otherPaths, hex: hex, storeItem: false)

        let first = try fixture.open()
        try kdExpectRows(first.queue)
        let firstID = first.databaseID
        #expect(try fixture.accounts().sorted() == [firstID + "@" + kdCanonical(fixture.path), "tasks"])
        #expect(try fixture.storedHex() == hex)
        // The other folder is upgraded too before the rotation: its item holds the same (shared) key.
        try KeyedDatabase(paths: otherPaths, name: "tasks", keychain: fixture.keychain).close()
        let otherPath = otherPaths.databaseURL(name: "tasks").path
        let retired = try first.rotateKey()
        try first.close()
        #expect(retired.alsoOpens == [kdCanonical(otherPath)], "the rotation says who else uses the retired key")
        // Pruning that retired key would lock the other folder out: refused, nothing deleted.
        let accounts = try fixture.accounts()
        let message = try #require(expectError(SecureStoreError.Code.keyStillInUse) {
            try KeyedDatabase.pruneRetiredKeys(paths: fixture.paths, keychain: fixture.keychain, before: Date().addingTimeInterval(60))
        }?.message)
        #expect(message == "the retired key '\(retired.account)' still opens the database '\(kdCanonical(otherPath))'; nothing was deleted")
        #expect(try fixture.accounts() == accounts)
        #expect(try kdRecordedID(fixture.path, hex: try #require(try fixture.storedHex())) == firstID)

        // The other folder still opens after the first one's rotation (0.1 lost it here).
        let second = try KeyedDatabase(paths: otherPaths, name: "tasks", keychain: fixture.keychain)
        try kdExpectRows(second.queue)
        #expect(second.databaseID != firstID)
        try second.close()
        #expect(try fixture.storedHex(account: second.databaseID + "@" + kdCanonical(otherPath)) == hex)
        #expect(try fixture.storedHex(account: "tasks") == hex, "the 0.1 item is kept")
    }

    /// The upgrade's steps are: store `<id>@<path>` (read back), then write the id into the file. Each
    /// state a kill can leave is planted here, and the next open settles it with one item for the path.
    @Test(arguments: ["before", "itemStored", "idWritten"])
    func anUpgradeInterruptedAtAnyStepOpens(_ state: String) throws {
        let fixture = try KDFixture()
        let hex = String(repeating: "6b", count: 32)
        try kdMakeLegacy(fixture, paths: fixture.paths, hex: hex)
        let id = String(repeating: "0c", count: 16)
        if state != "before" {
            try fixture.keychain.set(hex, service: fixture.service, account: id + "@" + kdCanonical(fixture.path))
        }
        if state == "idWritten" {
            let queue = try DatabaseQueue(path: fixture.path, key: try kdKey(hex: hex))
            try queue.write { db in
                try db.execute("CREATE TABLE securestore_identity (singleton INTEGER PRIMARY KEY CHECK (singleton = 0), database_id TEXT NOT NULL)")
                try db.execute("INSERT INTO securestore_identity VALUES (0, ?)", [id])
            }
            try queue.close()
        }
        let database = try fixture.open()
        try kdExpectRows(database.queue)
        if state != "before" { #expect(database.databaseID == id) }
        try database.close()
        let current = try fixture.accounts().filter { $0.contains("@") }
        #expect(current == [database.databaseID + "@" + kdCanonical(fixture.path)])
        #expect(try kdRecordedID(fixture.path, hex: hex) == database.databaseID)
        let again = try fixture.open()
        #expect(again.databaseID == database.databaseID)
        try again.close()
    }

    /// A 0.1 file renamed before its first open (its item is named after the old name) still finds its key.
    @Test func aRenamedZeroOneFileFindsItsKey() throws {
        let fixture = try KDFixture()
        let hex = String(repeating: "2f", count: 32)
        try kdMakeLegacy(fixture, paths: fixture.paths, hex: hex)
        let renamed = fixture.paths.databaseURL(name: "renamed").path
        try FileManager.default.moveItem(atPath: fixture.path, toPath: renamed)
        let database = try KeyedDatabase(paths: fixture.paths, name: "renamed", keychain: fixture.keychain)
        try kdExpectRows(database.queue)
        try database.close()
        #expect(try fixture.storedHex(account: database.databaseID + "@" + kdCanonical(renamed)) == hex)
    }

    /// For every upgrade step, and for a 0.1 file under its current or (a 0.1 rotation killed after its
    /// rename) its pending key: a child opens the 0.1 database and is killed by SIGKILL right after the
    /// step. The next open succeeds with every row, one current item for the path holding the id in the file,
    /// the 0.1 current item kept and a used 0.1 pending item gone.
    @Test(arguments: [1, 2, 3], [false, true])
    func anUpgradeKilledAfterAnyStepOpens(step: Int, fromPending: Bool) throws {
        let fixture = try KDFixture()
        let hex = String(repeating: fromPending ? "3e" : "5b", count: 32)
        try kdMakeLegacy(fixture, paths: fixture.paths, hex: hex, storeItem: !fromPending)
        if fromPending {
            try fixture.keychain.set(String(repeating: "19", count: 32), service: fixture.service, account: "tasks")
            try fixture.keychain.set(hex, service: fixture.service, account: "tasks.pending")
        }
        let child = try kdRun([
            kdStressBinary, "keyed", "upgrade-crash", String(step), fixture.directory.path, fixture.app, "tasks",
        ])
        #expect(child.signal == SIGKILL, "the child should die by SIGKILL after upgrade step \(step): \(child.stderr)")

        let database = try fixture.open()
        try database.queue.integrityCheck()
        try kdExpectRows(database.queue)
        let id = database.databaseID
        try database.close()
        let current = try fixture.accounts().filter { $0.contains("@") }
        #expect(current == [id + "@" + kdCanonical(fixture.path)])
        #expect(try fixture.storedHex() == hex)
        #expect(try kdRecordedID(fixture.path, hex: hex) == id)
        #expect(try fixture.accounts().contains("tasks"), "the 0.1 item is kept")
        #expect(try !fixture.accounts().contains("tasks.pending"), "a used 0.1 pending item is gone")
    }

    /// A 0.1 rotation killed after its rename: the file is under the 0.1 pending key. The upgrade takes
    /// that key; the 0.1 pending item goes (its key now lives under the id), the 0.1 current item stays.
    @Test func aZeroOneRotationKilledAfterItsRenameIsUpgradedWithThePendingKey() throws {
        let fixture = try KDFixture()
        let pending = String(repeating: "7d", count: 32)
        try kdMakeLegacy(fixture, paths: fixture.paths, hex: pending, storeItem: false)
        try fixture.keychain.set(String(repeating: "11", count: 32), service: fixture.service, account: "tasks")
        try fixture.keychain.set(pending, service: fixture.service, account: "tasks.pending")
        let database = try fixture.open()
        try kdExpectRows(database.queue)
        try database.close()
        #expect(try fixture.storedHex() == pending)
        #expect(try fixture.accounts().sorted() == [database.databaseID + "@" + kdCanonical(fixture.path), "tasks"])
    }

    /// Retired keys are listed with their date and deleted only by an explicit prune.
    @Test func retiredKeysAreListedAndPrunedOnlyWhenAsked() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        let first = try database.rotateKey()
        let second = try database.rotateKey()
        let keys = try KeyedDatabase.keys(paths: fixture.paths, keychain: fixture.keychain)
        #expect(keys.map(\.role) == [.current, .retired, .retired])
        #expect(keys[0].path == kdCanonical(fixture.path) && keys[0].fileExists)
        #expect(Set(keys.dropFirst().map(\.account)) == [first.account, second.account])
        #expect(try KeyedDatabase.pruneRetiredKeys(
            paths: fixture.paths, keychain: fixture.keychain, before: Date().addingTimeInterval(-3600)).isEmpty)
        #expect(try fixture.retiredAccounts().count == 2)
        let deleted = try KeyedDatabase.pruneRetiredKeys(
            paths: fixture.paths, keychain: fixture.keychain, before: Date().addingTimeInterval(60))
        #expect(Set(deleted) == [first.account, second.account])
        #expect(try fixture.retiredAccounts().isEmpty)
        try database.close()
        try fixture.open().close()
    }

    /// Rotation keeps the old key as a retired item, so a backup made before it still verifies.
    @Test func rotationRetiresTheOldKeyAndOlderBackupsStillOpen() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let oldHex = try #require(try fixture.storedHex())
        let backup = fixture.directory.appendingPathComponent("backups/before.db")
        #expect(try database.backup(to: backup).key == .current)
        let retired = try database.rotateKey()
        #expect(retired.databaseID == database.databaseID)
        #expect(retired.alsoOpens.isEmpty)
        #expect(retired.account.hasPrefix(database.databaseID + ".retired."))
        #expect(abs(retired.date.timeIntervalSinceNow) < 120)
        #expect(try fixture.retiredAccounts() == [retired.account])
        #expect(try fixture.storedHex(account: retired.account) == oldHex)
        let report = try database.verifyBackup(at: backup)
        #expect(report.key == .retired)
        #expect(report.keyAccount == retired.account)
        #expect(report.databaseID == database.databaseID)
        try database.close()
    }
}

// Restoring backups: after a rotation (retired key), after a lost keyring (recovery code), a damaged
// backup, and a restore killed by SIGKILL after every step.
import EncryptedDatabase
import Foundation
import Glibc
import Keychain
import SecureStore
import TestSupport
import Testing

/// The fixture's database with the `kdFill` rows, a backup of it, then one more row and a rotation: the
/// backup opens only with the retired key. Returns the backup's URL and the retired key's account.
private func kdBackupThenChange(_ fixture: KDFixture) throws -> (URL, String) {
    let database = try fixture.open()
    try kdFill(database)
    let backup = fixture.directory.deletingLastPathComponent()
        .appendingPathComponent(fixture.app + "-backups", isDirectory: true).appendingPathComponent("tasks.db")
    _ = try database.backup(to: backup)
    try database.queue.write { db in try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [kdRowCount, "after the backup"]) }
    let retired = try database.rotateKey()
    try database.close()
    return (backup, retired.account)
}

/// The number of rows in `item` of the database `name` of the fixture's app, opened as a user would.
private func kdItemCount(_ fixture: KDFixture, name: String = "tasks") throws -> Int {
    let database = try KeyedDatabase(paths: fixture.paths, name: name, keychain: fixture.keychain, createIfMissing: false)
    defer { try? database.close() }
    try database.queue.integrityCheck()
    return try database.queue.read { try $0.scalar("SELECT count(*) FROM item", as: Int.self) } ?? -1
}

private func kdAsideNames(_ fixture: KDFixture) throws -> [String] {
    try fixture.files().filter { $0.contains(".before-restore-") }.map { String($0.dropLast(3)) }
}

@Suite(.serialized) struct KeyedDatabaseRestoreTests {
    @Test func aBackupFromBeforeARotationRestoresWithTheRetiredKey() throws {
        let fixture = try KDFixture()
        let (backup, retired) = try kdBackupThenChange(fixture)
        defer { try? FileManager.default.removeItem(at: backup.deletingLastPathComponent()) }
        let backupBytes = try #require(kdBytes(backup.path))
        let oldID = try #require(try fixture.currentAccount()?.prefix(32))

        let report = try KeyedDatabase.restore(from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        #expect(report.openedWithAccount == retired)
        #expect(report.tableCount == 1 && report.rowCount == kdRowCount)
        #expect(report.databaseID != String(oldID), "a restore installs a database of its own")
        let asides = try kdAsideNames(fixture)
        #expect(asides.count == 1)
        #expect(report.asidePath == fixture.directory.path + "/" + asides[0] + ".db")

        #expect(try kdItemCount(fixture) == kdRowCount, "the backup's rows")
        #expect(try kdItemCount(fixture, name: asides[0]) == kdRowCount + 1, "the database that was there, kept aside")
        #expect(kdBytes(backup.path) == backupBytes)
        #expect(try FileManager.default.contentsOfDirectory(atPath: backup.deletingLastPathComponent().path) == ["tasks.db"])
        #expect(try fixture.storedHex(account: retired) != nil, "the retired key stays: the backup still opens")
        let keys = try KeyedDatabase.keys(paths: fixture.paths, keychain: fixture.keychain)
        #expect(keys.filter { $0.role == .current }.map(\.path) .sorted { ($0 ?? "") < ($1 ?? "") }
            == [kdCanonical(fixture.directory.path + "/" + asides[0] + ".db"), kdCanonical(fixture.path)].sorted())
        #expect(try fixture.files().sorted() == [asides[0] + ".db", "tasks.db"], "no restore leftovers")
    }

    /// Nothing in the keyring opens the backup: refused (nothing changes) until its recovery code is given.
    @Test func afterALostKeyringTheRecoveryCodeRestores() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let code = try database.recoveryCode()
        let backup = fixture.directory.appendingPathComponent("backups/tasks.db")
        _ = try database.backup(to: backup)
        try database.close()
        for account in try fixture.accounts() { try fixture.keychain.delete(service: fixture.service, account: account) }
        let other = try AppPaths(app: fixture.app, dataDirectory: fixture.directory.appendingPathComponent("new-machine"))
        let before = try fixture.files()

        let message = try #require(expectError(SecureStoreError.Code.missingKey) {
            try KeyedDatabase.restore(from: backup, paths: other, name: "tasks", keychain: fixture.keychain)
        }?.message)
        #expect(message.hasPrefix("no key in the keyring (service '\(fixture.service)'"))
        #expect(message.hasSuffix("give the recovery code of the key it was made under. Nothing was restored"))
        #expect(try fixture.files() == before)
        #expect(!FileManager.default.fileExists(atPath: other.dataDirectory.path), "the target folder was not made")
        #expect(try fixture.accounts().isEmpty)
        let wrong = RecoveryCode.code(for: DatabaseKey.random())
        expectError(SecureStoreError.Code.invalidRecoveryCode) {
            try KeyedDatabase.restore(from: backup, paths: other, name: "tasks", keychain: fixture.keychain, code: wrong)
        }
        #expect(try fixture.accounts().isEmpty)

        let report = try KeyedDatabase.restore(from: backup, paths: other, name: "tasks", keychain: fixture.keychain, code: code)
        #expect(report.openedWithAccount == nil)
        #expect(report.asidePath == nil)
        let restored = try KeyedDatabase(paths: other, name: "tasks", keychain: fixture.keychain, createIfMissing: false)
        try kdExpectRows(restored.queue)
        try restored.close()
    }

    @Test func aDamagedBackupIsRefusedAndNothingChanges() throws {
        let fixture = try KDFixture()
        let (backup, _) = try kdBackupThenChange(fixture)
        defer { try? FileManager.default.removeItem(at: backup.deletingLastPathComponent()) }
        var bytes = try #require(kdBytes(backup.path))
        bytes[bytes.count - 100] ^= 0x5a
        try bytes.write(to: backup)
        let files = try fixture.files().map { ($0, kdBytes(fixture.directory.path + "/" + $0)) }
        let accounts = try fixture.accounts()
        let message = try #require(expectError(SecureStoreError.Code.verificationFailed) {
            try KeyedDatabase.restore(from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        }?.message)
        #expect(message.hasSuffix("nothing was restored"))
        #expect(try fixture.files().map { ($0, kdBytes(fixture.directory.path + "/" + $0)) }.elementsEqual(files) { $0 == $1 })
        #expect(try fixture.accounts() == accounts)
        #expect(kdBytes(backup.path) == bytes)
    }

    /// The database is open in another handle: the restore is refused before anything is stored or linked.
    @Test func aRestoreWhileTheDatabaseIsOpenIsRefusedAndChangesNothing() throws {
        let fixture = try KDFixture()
        let (backup, _) = try kdBackupThenChange(fixture)
        defer { try? FileManager.default.removeItem(at: backup.deletingLastPathComponent()) }
        let open = try fixture.open()
        defer { try? open.close() }
        let accounts = try fixture.accounts()
        let files = try fixture.files()
        let message = try #require(expectError(SecureStoreError.Code.inUse) {
            try KeyedDatabase.restore(from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        }?.message)
        #expect(message.contains("is open in another process (or another handle)"))
        #expect(try fixture.accounts() == accounts)
        #expect(try fixture.files() == files)
        #expect(try open.queue.read { try $0.scalar("SELECT count(*) FROM item", as: Int.self) } == kdRowCount + 1)
    }

    /// For every step: a child restores and is killed by SIGKILL right after it. The database path then
    /// opens with either the old contents (before the commit point) or the backup's (after), the backup is
    /// unchanged, the set-aside database opens under its own name, and a restore run again completes.
    @Test(arguments: KeyedDatabase.RestoreStep.allCases)
    func aRestoreKilledAfterAnyStepLeavesADatabaseThatOpens(step: KeyedDatabase.RestoreStep) throws {
        let fixture = try KDFixture()
        let (backup, _) = try kdBackupThenChange(fixture)
        defer { try? FileManager.default.removeItem(at: backup.deletingLastPathComponent()) }
        let backupBytes = try #require(kdBytes(backup.path))

        // The child's private copy goes under the fixture's folder (removed with it), not /tmp.
        let scratch = fixture.directory.deletingLastPathComponent().appendingPathComponent(fixture.app + "-tmp").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let child = try kdRun([
            "env", "TMPDIR=" + scratch, kdStressBinary, "keyed", "restore-crash", String(step.rawValue), fixture.directory.path, fixture.app, "tasks",
            backup.path,
        ])
        #expect(child.signal == SIGKILL, "the child should die by SIGKILL after step \(step.rawValue): \(child.stderr)")
        #expect(kdBytes(backup.path) == backupBytes)

        // From the commit point on, the next open finishes the restore before it opens anything.
        let installed = step.rawValue >= KeyedDatabase.RestoreStep.committed.rawValue
        #expect(try kdItemCount(fixture) == (installed ? kdRowCount : kdRowCount + 1))
        let asides = try kdAsideNames(fixture)
        #expect(asides.count == (step.rawValue >= KeyedDatabase.RestoreStep.keptAside.rawValue ? 1 : 0))
        for aside in asides { #expect(try kdItemCount(fixture, name: aside) == kdRowCount + 1) }

        let killedCopies = try FileManager.default.contentsOfDirectory(atPath: scratch)
        #expect(killedCopies.count == (step == .finished ? 0 : 1), "the killed child's private copy: \(killedCopies)")
        if !installed {
            setenv("TMPDIR", scratch, 1)
            defer { unsetenv("TMPDIR") }
            try KeyedDatabase.restore(from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
            #expect(try kdItemCount(fixture) == kdRowCount)
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch).isEmpty, "the dead child's copy is removed")
        }
        #expect(try fixture.files().filter { $0.hasPrefix(".") }.isEmpty, "no restore leftovers once a restore completed")
    }
}

// Attachments through the keyed database's lifecycle: restore (with the attachments file beside the backup, a
// kill after every step, a missing or damaged attachments backup), key rotation and recovery. Real keyring, real
// SQLCipher files, attachments compared by SHA-256 (`sha256sum`, another implementation) and byte for byte.
import EncryptedDatabase
import Foundation
import Glibc
import Keychain
import SecureStore
import TestSupport
import Testing

/// Random bytes of `count` (from /dev/urandom, as a user's files would be).
func attRandomBytes(_ count: Int) throws -> Data {
    let handle = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
    defer { try? handle.close() }
    return try handle.read(upToCount: count) ?? Data()
}

/// The SHA-256 of `data` as `sha256sum` (coreutils) computes it.
func attSHA256(_ data: Data) throws -> String {
    String(try kdRun(["sha256sum"], input: data).stdout.prefix(64))
}

/// The owner every attachment of these tests belongs to: the row 1 of the fixture's `item` table.
let attOwner = try! AttachmentOwner(table: "item", key: Data([1]))

/// What a database's attachments are: name → SHA-256, every one read back in full (digest checked by the store)
/// and hashed again here from the bytes it returned.
func attContents(_ store: AttachmentStore, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: String] {
    var contents: [String: String] = [:]
    for attachment in try store.attachments(of: attOwner) {
        let bytes = try store.data(id: attachment.id)
        #expect(try attSHA256(bytes) == attachment.sha256, sourceLocation: sourceLocation)
        contents[attachment.name] = attachment.sha256
    }
    return contents
}

/// The attachments of the keyed database `name` of the fixture, opened as an application would.
func attContents(_ fixture: KDFixture, name: String = "tasks", sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: String] {
    let database = try KeyedDatabase(paths: fixture.paths, name: name, keychain: fixture.keychain, createIfMissing: false)
    defer { try? database.close() }
    let store = database.attachmentStore()
    defer { try? store.close() }
    #expect(try store.verify().problems == [], sourceLocation: sourceLocation)
    return try attContents(store, sourceLocation: sourceLocation)
}

/// The fixture's database with rows and the attachments `a.bin`, `b.bin` and `n.txt` (inline), backed up; then `c.bin` is added and
/// `a.bin` deleted, and the key rotated. Returns the backup, and what the backup's and the current attachments are.
private func attBackupThenChange(_ fixture: KDFixture) throws -> (backup: URL, inBackup: [String: String], current: [String: String]) {
    let database = try fixture.open()
    defer { try? database.close() }
    try kdFill(database)
    let store = database.attachmentStore()
    defer { try? store.close() }
    let a = try attRandomBytes(300_000), b = try attRandomBytes(1_200_000), c = try attRandomBytes(70_000)
    // n.txt is small enough to be kept inside the database (inline): every restore test covers both kinds.
    let n = Data("a note kept inside the database".utf8)
    let added = try store.add([.data(a, name: "a.bin"), .data(b, name: "b.bin"), .data(n, name: "n.txt")], to: attOwner)
    #expect(added.map(\.isInline) == [false, false, true])
    let backup = fixture.directory.deletingLastPathComponent()
        .appendingPathComponent(fixture.app + "-backups", isDirectory: true).appendingPathComponent("tasks.db")
    _ = try database.backup(to: backup)
    try store.add(.data(c, name: "c.bin"), to: attOwner)
    try store.delete(id: added[0].id)
    try database.queue.write { db in try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [kdRowCount, "after the backup"]) }
    _ = try database.rotateKey()
    return (
        backup, ["a.bin": try attSHA256(a), "b.bin": try attSHA256(b), "n.txt": try attSHA256(n)],
        ["b.bin": try attSHA256(b), "c.bin": try attSHA256(c), "n.txt": try attSHA256(n)]
    )
}

/// Every file of the folder with its bytes' SHA-256 (the lock file aside), to show that nothing changed.
private func attHashes(_ directory: String) throws -> [String: String] {
    var hashes: [String: String] = [:]
    for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where !name.hasSuffix(".lock") {
        hashes[name] = try attSHA256(kdBytes(directory + "/" + name) ?? Data())
    }
    return hashes
}

private func attAsideNames(_ fixture: KDFixture) throws -> [String] {
    try fixture.files().filter { $0.contains(".before-restore-") && !$0.hasSuffix(".attachments.db") }.map { String($0.dropLast(3)) }
}

@Suite(.serialized) struct AttachmentRestoreTests {
    @Test func aRestoreBringsBackTheBackupsAttachmentsAndKeepsTheCurrentOnesAside() throws {
        let fixture = try KDFixture()
        let (backup, inBackup, current) = try attBackupThenChange(fixture)
        let backups = backup.deletingLastPathComponent().path
        defer { try? FileManager.default.removeItem(atPath: backups) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: backups).sorted() == ["tasks.attachments.db", "tasks.db"])
        let backupHashes = try attHashes(backups)

        let report = try KeyedDatabase.restore(from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        #expect(report.attachmentCount == 3 && report.attachmentBytes == 1_500_031, "two chunked, one inline")
        #expect(report.description.contains("attachments: 3 (1.4 MiB), each read back in full with its SHA-256 digest"))
        let asides = try attAsideNames(fixture)
        try #require(asides.count == 1)
        #expect(report.attachmentsAsidePath == fixture.directory.path + "/" + asides[0] + ".attachments.db")
        #expect(report.description.hasSuffix("its attachments are kept at: \(report.attachmentsAsidePath ?? "")"))

        #expect(try attContents(fixture) == inBackup, "the backup's attachments, byte for byte")
        #expect(try attContents(fixture, name: asides[0]) == current, "the attachments that were there, kept aside")
        #expect(try kdItemCount(fixture) == kdRowCount)
        #expect(try attHashes(backups) == backupHashes, "the backup and its attachments file are left as they were")
        let files = try fixture.files().sorted()
        #expect(
            files == [asides[0] + ".attachments.db", asides[0] + ".db", "tasks.attachments.db", "tasks.db"].sorted(),
            "no restore leftovers: \(files)")
        for file in try fixture.files() { #expect(try kdMode(fixture.directory.path + "/" + file) == 0o600, "\(file)") }

        // The restored pair keeps working: attach, back up and restore again.
        let database = try fixture.open()
        let store = database.attachmentStore()
        try store.add(.data(Data("after the restore".utf8), name: "d.txt"), to: attOwner)
        try store.close()
        try database.close()
        #expect(try attContents(fixture).keys.sorted() == ["a.bin", "b.bin", "d.txt", "n.txt"])
    }

    /// A backup made before the first attachment has no attachments file: the restored database has none, the
    /// current attachments file goes aside with the current database (whose key opens it), and the restored
    /// database makes a new one at its first attachment.
    @Test func aBackupWithoutAttachmentsSetsTheCurrentAttachmentsAside() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let backup = fixture.directory.deletingLastPathComponent()
            .appendingPathComponent(fixture.app + "-backups", isDirectory: true).appendingPathComponent("tasks.db")
        defer { try? FileManager.default.removeItem(at: backup.deletingLastPathComponent()) }
        _ = try database.backup(to: backup)
        let store = database.attachmentStore()
        try store.add(.data(try attRandomBytes(400_000), name: "later.bin"), to: attOwner)
        let current = try attContents(store)
        try store.close()
        try database.close()
        #expect(try FileManager.default.contentsOfDirectory(atPath: backup.deletingLastPathComponent().path) == ["tasks.db"])

        let report = try KeyedDatabase.restore(from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        #expect(report.attachmentCount == 0 && !report.description.contains("attachments: "))
        let asides = try attAsideNames(fixture)
        try #require(asides.count == 1)
        #expect(report.attachmentsAsidePath == fixture.directory.path + "/" + asides[0] + ".attachments.db")
        #expect(try fixture.files().sorted() == [asides[0] + ".attachments.db", asides[0] + ".db", "tasks.db"].sorted())
        #expect(try attContents(fixture).isEmpty)
        #expect(try attContents(fixture, name: asides[0]) == current)

        let restored = try fixture.open()
        let fresh = restored.attachmentStore()
        try fresh.add(.data(Data("new".utf8), name: "new.txt"), to: attOwner)
        try fresh.close()
        try restored.close()
        #expect(try attContents(fixture).keys.sorted() == ["new.txt"])
        #expect(try attContents(fixture, name: asides[0]) == current)
    }

    /// For every step: a child restores and is killed by SIGKILL right after it. The database then opens with its
    /// own attachments, every one reading back by hash: the old pair before the commit point, the backup's after
    /// it; a set-aside database opens with its own; a restore run again completes with the backup's.
    @Test(arguments: KeyedDatabase.RestoreStep.allCases)
    func aRestoreKilledAfterAnyStepLeavesEachDatabaseWithItsOwnAttachments(step: KeyedDatabase.RestoreStep) throws {
        let fixture = try KDFixture()
        let (backup, inBackup, current) = try attBackupThenChange(fixture)
        let backups = backup.deletingLastPathComponent().path
        defer { try? FileManager.default.removeItem(atPath: backups) }
        let backupHashes = try attHashes(backups)
        let scratch = fixture.directory.deletingLastPathComponent().appendingPathComponent(fixture.app + "-tmp").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }

        let child = try kdRun([
            "env", "TMPDIR=" + scratch, kdStressBinary, "keyed", "restore-crash", String(step.rawValue),
            fixture.directory.path, fixture.app, "tasks", backup.path,
        ])
        #expect(child.signal == SIGKILL, "the child should die by SIGKILL after step \(step): \(child.stderr)")
        #expect(try attHashes(backups) == backupHashes)

        let committed = step.rawValue >= KeyedDatabase.RestoreStep.committed.rawValue
        #expect(try attContents(fixture) == (committed ? inBackup : current))
        #expect(try kdItemCount(fixture) == (committed ? kdRowCount : kdRowCount + 1))
        let asides = try attAsideNames(fixture)
        #expect(asides.count == (step.rawValue >= KeyedDatabase.RestoreStep.keptAside.rawValue ? 1 : 0))
        for aside in asides { #expect(try attContents(fixture, name: aside) == current) }
        if !committed {
            setenv("TMPDIR", scratch, 1)
            defer { unsetenv("TMPDIR") }
            try KeyedDatabase.restore(from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
            #expect(try attContents(fixture) == inBackup)
        }
        #expect(try fixture.files().filter { $0.hasPrefix(".") }.isEmpty, "no restore leftovers")
    }

    @Test func aBackupWithoutItsAttachmentsFileIsRefusedAndNothingChanges() throws {
        let fixture = try KDFixture()
        let (backup, _, current) = try attBackupThenChange(fixture)
        let backups = backup.deletingLastPathComponent().path
        defer { try? FileManager.default.removeItem(atPath: backups) }
        try FileManager.default.removeItem(atPath: backups + "/tasks.attachments.db")
        let files = try attHashes(fixture.directory.path)
        let accounts = try fixture.accounts()

        let message = try #require(expectError(SecureStoreError.Code.notFound) {
            try KeyedDatabase.restore(from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        }?.message)
        #expect(message == "the backup '\(backup.path)' lists 2 attachments kept in an attachments file, but that file '\(backups)/tasks.attachments.db' "
            + "is not beside it (db backup writes it there); put it back and try again. Nothing was restored")
        #expect(try attHashes(fixture.directory.path) == files)
        #expect(try fixture.accounts() == accounts)
        #expect(try attContents(fixture) == current)
    }

    /// One byte of the attachments file beside the backup is changed, or the file belongs to another backup: the
    /// restore reads every attachment back before it installs anything, and refuses.
    @Test func aDamagedOrForeignAttachmentsBackupIsRefusedAndNothingChanges() throws {
        let fixture = try KDFixture()
        let (backup, _, current) = try attBackupThenChange(fixture)
        let backups = backup.deletingLastPathComponent().path
        defer { try? FileManager.default.removeItem(atPath: backups) }
        let attachments = backups + "/tasks.attachments.db"
        let original = try #require(kdBytes(attachments))
        var damaged = original
        damaged[damaged.count / 2] ^= 0x5a
        try damaged.write(to: URL(fileURLWithPath: attachments))
        let files = try attHashes(fixture.directory.path)
        let accounts = try fixture.accounts()

        let message = try #require(expectError(SecureStoreError.Code.verificationFailed) {
            try KeyedDatabase.restore(from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        }?.message)
        #expect(message.hasPrefix("the attachments file beside the backup, '\(attachments)', "))
        #expect(message.hasSuffix("Nothing was restored") || message.hasSuffix("nothing was restored"))
        #expect(try attHashes(fixture.directory.path) == files)
        #expect(try fixture.accounts() == accounts, "the restore's new key item is removed again")
        #expect(kdBytes(attachments) == damaged)

        // Another database's attachments file (another attachments key) in its place.
        let other = try KDFixture()
        let database = try other.open()
        // 100 000 bytes: written as chunks into that database's attachments file (not inline).
        try database.attachmentStore().add(.data(Data(repeating: 0x78, count: 100_000), name: "x"), to: attOwner)
        try database.close()
        try FileManager.default.removeItem(atPath: attachments)
        try FileManager.default.copyItem(atPath: other.directory.path + "/tasks.attachments.db", toPath: attachments)
        let foreign = try #require(expectError(SecureStoreError.Code.verificationFailed) {
            try KeyedDatabase.restore(from: backup, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        }?.message)
        #expect(foreign == "the attachments file beside the backup, '\(attachments)', does not open with the attachments "
            + "key inside the backup: it belongs to another backup or is damaged. Nothing was restored")
        #expect(try attHashes(fixture.directory.path) == files)
        #expect(try fixture.accounts() == accounts)
        #expect(try attContents(fixture) == current)
    }

    /// A rotation re-encrypts the record database only; the attachments key inside it comes along, so every
    /// attachment reads back by hash through the same handle, after reopening, and after a second rotation.
    @Test func keyRotationKeepsEveryAttachmentReadable() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let store = database.attachmentStore()
        let big = try attRandomBytes(3_000_000)
        try store.add([.data(big, name: "big.bin"), .data(Data("small".utf8), name: "small.txt")], to: attOwner)
        let before = try attContents(store)
        let attachmentsFile = fixture.directory.path + "/tasks.attachments.db"
        let fileBytes = try #require(kdBytes(attachmentsFile))

        _ = try database.rotateKey()
        #expect(try attContents(store) == before, "through the handle that rotated")
        #expect(kdBytes(attachmentsFile) == fileBytes, "the attachments file is not re-encrypted")
        try store.close()
        try database.close()
        #expect(try attContents(fixture) == before, "after reopening")

        let again = try fixture.open()
        _ = try again.rotateKey()
        try again.close()
        #expect(try attContents(fixture) == before, "after a second rotation")
        #expect(before["big.bin"] == (try attSHA256(big)))
    }

    /// The keyring lost the key: the recovery code stores it again, and the attachments (key inside the database)
    /// read back as before.
    @Test func recoveryWithTheCodeKeepsEveryAttachmentReadable() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let store = database.attachmentStore()
        try store.add(.data(try attRandomBytes(600_000), name: "scan.pdf"), to: attOwner)
        let before = try attContents(store)
        let code = try database.recoveryCode()
        try store.close()
        try database.close()
        #expect(try fixture.deleteCurrentKey())
        expectError(SecureStoreError.Code.missingKey) { try fixture.open() }

        let recovered = try KeyedDatabase.recover(paths: fixture.paths, name: "tasks", keychain: fixture.keychain, code: code)
        let recoveredStore = recovered.attachmentStore()
        #expect(try attContents(recoveredStore) == before)
        try recoveredStore.close()
        try recovered.close()
        #expect(try attContents(fixture) == before)
    }
}

/// The number of rows in `item` of the database `name`, opened as a user would.
private func kdItemCount(_ fixture: KDFixture, name: String = "tasks") throws -> Int {
    let database = try KeyedDatabase(paths: fixture.paths, name: name, keychain: fixture.keychain, createIfMissing: false)
    defer { try? database.close() }
    return try database.queue.read { try $0.scalar("SELECT count(*) FROM item", as: Int.self) } ?? -1
}

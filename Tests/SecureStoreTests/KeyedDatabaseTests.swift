// Creating and opening a keyed database against the real keyring of the harness.
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import TestSupport
import Testing

@Suite(.serialized) struct KeyedDatabaseOpeningTests {
    @Test func theFirstOpenStoresAHexKeyThatOpensTheNewFile() throws {
        let fixture = try KDFixture()
        #expect(try fixture.storedHex() == nil)
        let database = try fixture.open()
        try kdFill(database)
        try database.close()

        // Another Secret Service client sees 64 lowercase hex digits under <app>.database-key / <name>.
        let hex = try #require(try fixture.storedHex())
        #expect(hex.utf8.count == 64)
        #expect(hex.allSatisfy { "0123456789abcdef".contains($0) })
        // That key, and only it, opens the file, which is 0600.
        let queue = try DatabaseQueue(path: fixture.path, key: try kdKey(hex: hex))
        try kdExpectRows(queue)
        let recorded = try queue.read { try $0.scalar("SELECT database_id FROM securestore_identity", as: String.self) }
        try queue.close()
        #expect(try kdMode(fixture.path) == 0o600)
        let items = try fixture.keychain.items(service: fixture.service)
        // One item, named by the database id (also inside the file) and the file's place.
        #expect(items.count == 1)
        let account = try #require(items.first?.account)
        #expect(account.prefix(32).allSatisfy { "0123456789abcdef".contains($0) })
        #expect(account.dropFirst(32) == "@" + kdCanonical(fixture.path))
        #expect(items.first?.label == "SecureStore database key: \(fixture.app)/tasks at \(kdCanonical(fixture.path))")
        #expect(recorded.map { String($0) } == String(account.prefix(32)))
    }

    @Test func reopeningReadsTheRowsWithTheStoredKey() throws {
        let fixture = try KDFixture()
        let first = try fixture.open()
        try kdFill(first)
        try first.close()
        let hex = try fixture.storedHex()

        let second = try fixture.open()
        try kdExpectRows(second.queue)
        try second.close()
        #expect(try fixture.storedHex() == hex, "reopening must not replace the key")
    }

    @Test func twoHandlesInOneProcessShareTheDatabase() throws {
        let fixture = try KDFixture()
        let first = try fixture.open()
        try kdFill(first)
        let second = try fixture.open()
        try kdExpectRows(second.queue)
        try first.close()
        try second.close()
    }

    @Test func aMissingKeyWithAnExistingFileIsRefusedWithTheRecoveryPath() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        try database.close()
        #expect(try fixture.deleteCurrentKey())
        let before = try #require(kdBytes(fixture.path))
        let filesBefore = try fixture.files()

        let message = try #require(expectError(SecureStoreError.Code.missingKey) { try fixture.open() }?.message)
        #expect(message.contains("no key for database 'tasks'"))
        #expect(message.contains(fixture.service))
        #expect(message.contains("a recovery code of its key"))
        #expect(message.contains("never created over existing data"))
        // Nothing changed: the file is byte-identical and no new key was stored.
        #expect(kdBytes(fixture.path) == before)
        #expect(try fixture.files() == filesBefore)
        #expect(try fixture.storedHex() == nil)
        #expect(try !fixture.hasPendingKey())
    }

    @Test func anOrphanedWriteAheadLogIsNeverCoveredByANewDatabase() throws {
        let fixture = try KDFixture()
        try FileManager.default.createDirectory(at: fixture.directory, withIntermediateDirectories: true)
        let wal = fixture.path + "-wal"
        #expect(FileManager.default.createFile(atPath: wal, contents: Data(repeating: 0xA5, count: 8192)))

        let message = try #require(expectError(SecureStoreError.Code.notFound) { try fixture.open() }?.message)
        #expect(message.contains("write-ahead log"))
        #expect(!FileManager.default.fileExists(atPath: fixture.path))
        #expect(kdBytes(wal) == Data(repeating: 0xA5, count: 8192))
        #expect(try fixture.storedHex() == nil, "no key may be made for a database that cannot be created")
    }

    @Test func aWrongStoredKeyIsAClearErrorAndTheFileIsUntouched() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        try database.close()
        let before = try #require(kdBytes(fixture.path))
        let other = String(repeating: "5a", count: 32)
        let account = try #require(try fixture.currentAccount())
        try fixture.keychain.set(other, service: fixture.service, account: account)

        let message = try #require(expectError(SecureStoreError.Code.keyMismatch) { try fixture.open() }?.message)
        #expect(message.contains("does not open"))
        #expect(message.contains(fixture.path))
        #expect(message.contains("file was not changed"))
        #expect(!message.contains(other))
        #expect(kdBytes(fixture.path) == before)
        #expect(try fixture.storedHex() == other, "the stored key is not replaced")
    }

    @Test func aStoredItemThatIsNotAKeyIsRefused() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try database.close()
        let account = try #require(try fixture.currentAccount())
        try fixture.keychain.set("hunter2", service: fixture.service, account: account)
        let message = try #require(expectError(SecureStoreError.Code.keyMismatch) { try fixture.open() }?.message)
        #expect(message.contains("64 hexadecimal digits"))
        #expect(!message.contains("hunter2"))
    }

    @Test(.enabled(if: Harness.isGnomeKeyring, "keyring-ctl drives gnome-keyring")) func aLockedKeyringSurfacesAndNothingIsCreated() throws {
        let fixture = try KDFixture()
        try Harness.keyringCtl("lock")
        defer { _ = try? kdRun(["keyring-ctl", "unlock"]) }

        expectError(KeychainError.Code.locked) { try fixture.open() }
        #expect(!FileManager.default.fileExists(atPath: fixture.path))
        #expect(try fixture.files().isEmpty)

        try Harness.keyringCtl("unlock")
        let database = try fixture.open()
        try kdFill(database)
        try database.close()

        // Locked with an existing database: the same error, the file untouched.
        let before = try #require(kdBytes(fixture.path))
        try Harness.keyringCtl("lock")
        expectError(KeychainError.Code.locked) { try fixture.open() }
        #expect(kdBytes(fixture.path) == before)
    }

    @Test func infoSaysWhereTheKeyLivesAndNeverTheKey() throws {
        let fixture = try KDFixture()
        let before = try KeyedDatabase.info(paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        #expect(!before.exists)
        #expect(!before.hasKey)

        let database = try fixture.open()
        try kdFill(database)
        let info = try database.info()
        #expect(info.path == fixture.path)
        #expect(info.exists)
        #expect((info.fileSize ?? 0) > 0)
        #expect(info.keyService == "\(fixture.app).database-key")
        let account = try #require(try fixture.currentAccount())
        #expect(info.keyAccount == account)
        #expect(info.databaseID == database.databaseID)
        #expect(account == database.databaseID + "@" + kdCanonical(fixture.path))
        #expect(info.pendingKeyAccount == nil)
        #expect(info.keyCollection == "default")
        #expect(info.hasKey)
        #expect(!info.rotationPending)
        let hex = try #require(try fixture.storedHex())
        #expect(info.description.contains("service '\(fixture.app).database-key', account '\(account)'"))
        #expect(!info.description.contains(hex))
        try database.close()
    }

    @Test(arguments: ["", ".hidden", "a/b", "tasks.pending", String(repeating: "x", count: 65)])
    func badDatabaseNamesAreRefused(name: String) throws {
        let fixture = try KDFixture()
        expectError(SecureStoreError.Code.invalidArgument) {
            try KeyedDatabase(paths: fixture.paths, name: name, keychain: fixture.keychain)
        }
        #expect(try fixture.keychain.items(service: fixture.service).isEmpty)
    }
}

@Suite(.serialized) struct KeyedDatabaseProcessTests {
    /// Four processes create the same new database at once: the lock file lets exactly one make the
    /// key; the others open that database, and every row of every writer is there.
    @Test func processesCreatingOneDatabaseAtOnceShareOneKey() throws {
        let fixture = try KDFixture()
        let writers = 4, rows = 25
        let results = KDResults()
        let directory = fixture.directory.path, app = fixture.app
        DispatchQueue.concurrentPerform(iterations: writers) { writer in
            let result = try? kdRun([
                kdStressBinary, "keyed", "write", directory, app, "tasks", String(writer), String(rows),
            ])
            results.append(result)
        }
        for result in results.all {
            #expect(result?.status == 0, "\(result?.stderr ?? "spawn failed")")
        }
        #expect(try fixture.keychain.accounts(service: fixture.service).count == 1, "one key item")
        let database = try fixture.open()
        #expect(try database.queue.read { try $0.scalar("SELECT count(*) FROM entry", as: Int.self) } == writers * rows)
        try database.close()
    }
}

private final class KDResults: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [KDProcessResult?] = []
    func append(_ result: KDProcessResult?) { lock.withLock { results.append(result) } }
    var all: [KDProcessResult?] { lock.withLock { results } }
}

@Suite struct KeyedDatabaseCollectionTests {
    @Test func aKeyIsNeverPutInTheSessionCollection() throws {
        let fixture = try KDFixture()
        let session = Keychain(configuration: Keychain.Configuration(collection: .session))
        let message = try #require(expectError(SecureStoreError.Code.invalidArgument) {
            try KeyedDatabase(paths: fixture.paths, name: "tasks", keychain: session)
        }?.message)
        #expect(message.contains("gone at logout"))
        #expect(!FileManager.default.fileExists(atPath: fixture.path))
    }
}

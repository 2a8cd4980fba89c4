// Key rotation: the result, refusal while in use, and a SIGKILL after every step.
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import TestSupport
import Testing

@Suite(.serialized) struct KeyedDatabaseRotationTests {
    @Test func rotationKeepsEveryRowAndRetiresTheOldKey() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let oldHex = try #require(try fixture.storedHex())
        let oldCode = try database.recoveryCode()

        var steps: [KeyedDatabase.RotationStep] = []
        try database.rotateKey { steps.append($0) }
        #expect(steps == KeyedDatabase.RotationStep.allCases)
        #expect(steps.last?.description == "removed the pending key; rotation complete")
        try kdExpectRows(database.queue)
        try database.queue.write { db in try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [kdRowCount, "after"]) }
        #expect(try database.recoveryCode() != oldCode)
        try database.close()

        let newHex = try #require(try fixture.storedHex())
        #expect(newHex != oldHex)
        #expect(try !fixture.hasPendingKey())
        #expect(try fixture.files() == ["tasks.db"], "no copy, -wal or pending file is left")
        expectError(DatabaseError.Code.wrongKeyOrNotADatabase) { try DatabaseQueue(path: fixture.path, key: try kdKey(hex: oldHex)) }
        let queue = try DatabaseQueue(path: fixture.path, key: try kdKey(hex: newHex))
        #expect(try queue.read { try $0.scalar("SELECT count(*) FROM item", as: Int.self) } == kdRowCount + 1)
        try queue.integrityCheck()
        try queue.close()

        // The reference tool reads it with the new key.
        let reference = try sqlcipher(
            fixture.path, key: .raw(hex: newHex), pageSize: 4096, "SELECT count(*) FROM item;\nPRAGMA user_version;\n")
        #expect(reference.stdout.split(separator: "\n").suffix(2) == ["\(kdRowCount + 1)", "7"])
    }

    /// A program that opens the file without SecureStore's lock file (the `sqlcipher` tool, another
    /// library) is caught by the -wal check after the rotation closes its own connection.
    @Test func rotationIsRefusedWhileAConnectionOutsideTheLockHasTheFileOpen() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let hex = try #require(try fixture.storedHex())
        let outsider = try DatabaseQueue(path: fixture.path, key: try kdKey(hex: hex))
        try outsider.write { db in try db.execute("CREATE TABLE IF NOT EXISTS outsider (x)") }
        let before = try fixture.files()

        let message = try #require(expectError(SecureStoreError.Code.inUse) { try database.rotateKey() }?.message)
        #expect(message.contains("is open in another program"))
        #expect(try fixture.storedHex() == hex, "the current key is unchanged")
        #expect(try !fixture.hasPendingKey(), "no pending key is left behind")
        #expect(try fixture.files() == before, "no rotation file is left behind")
        try kdExpectRows(database.queue)
        try outsider.close()

        try database.rotateKey()
        try kdExpectRows(database.queue)
        #expect(try fixture.storedHex() != hex)
        try database.close()
    }

    @Test func rotationIsRefusedWhileAnotherHandleHasTheDatabaseOpen() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let other = try fixture.open()
        let hex = try fixture.storedHex()

        let message = try #require(expectError(SecureStoreError.Code.inUse) { try database.rotateKey() }?.message)
        #expect(message.contains("open in another process"))
        #expect(try fixture.storedHex() == hex)
        #expect(try !fixture.hasPendingKey())
        try kdExpectRows(database.queue)
        try kdExpectRows(other.queue)
        try other.close()

        try database.rotateKey()
        try kdExpectRows(database.queue)
        try database.close()
    }

    /// For every step: a child process rotates and is killed by SIGKILL right after that step. The next
    /// open must succeed with the stored keys, find every row, pass the integrity check and leave no
    /// pending key or rotation file behind.
    @Test(arguments: KeyedDatabase.RotationStep.allCases)
    func aRotationKilledAfterAnyStepIsFinishedOrUndoneByTheNextOpen(step: KeyedDatabase.RotationStep) throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        try database.close()
        let oldHex = try #require(try fixture.storedHex())

        let child = try kdRun([
            kdStressBinary, "keyed", "rotate-crash", String(step.rawValue), fixture.directory.path, fixture.app, "tasks",
        ])
        #expect(child.signal == SIGKILL, "the child should die by SIGKILL after step \(step.rawValue): \(child.stderr)")
        let afterCrash = try KeyedDatabase.info(paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        #expect(afterCrash.rotationPending == (step != .finished))

        let reopened = try fixture.open()
        try reopened.queue.integrityCheck()
        try kdExpectRows(reopened.queue)
        try reopened.close()

        #expect(try !fixture.hasPendingKey())
        #expect(try fixture.files() == ["tasks.db"])
        let currentHex = try #require(try fixture.storedHex())
        // Before the rename the old key stays; from the rename on, the new one.
        #expect((currentHex == oldHex) == (step.rawValue < KeyedDatabase.RotationStep.replaced.rawValue))
        let queue = try DatabaseQueue(path: fixture.path, key: try kdKey(hex: currentHex))
        try kdExpectRows(queue)
        try queue.close()
    }

    @Test func leftoversOfAnInterruptedExportAreRemoved() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        try database.close()
        // As if killed inside sqlcipher_export: a pending key and a half-written temporary copy.
        let half = fixture.directory.appendingPathComponent("..tasks.db.rotating.tmp-1f2e3d").path
        #expect(FileManager.default.createFile(atPath: half, contents: Data(repeating: 7, count: 12288)))
        let id = try #require(try fixture.currentAccount()?.prefix(32))
        try fixture.keychain.set(String(repeating: "0f", count: 32), service: fixture.service, account: id + ".pending")
        #expect(try KeyedDatabase.info(paths: fixture.paths, name: "tasks", keychain: fixture.keychain).rotationPending)

        let reopened = try fixture.open()
        try kdExpectRows(reopened.queue)
        try reopened.close()
        #expect(!FileManager.default.fileExists(atPath: half))
        #expect(try !fixture.hasPendingKey())
    }
}

@Suite(.serialized) struct KeyedDatabaseEdgeTests {
    @Test func anEmptyDatabaseRotatesAndReopens() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        let oldHex = try fixture.storedHex()
        try database.rotateKey()
        #expect(try database.queue.read {
            try $0.scalar("SELECT count(*) FROM sqlite_master WHERE name <> 'securestore_identity'", as: Int.self)
        } == 0)
        try database.close()
        #expect(try fixture.storedHex() != oldHex)
        let reopened = try fixture.open()
        try reopened.close()
    }

    @Test func aCreationKilledBeforeItsLinkLeavesNothingBehindTheNextOpen() throws {
        let fixture = try KDFixture()
        try FileManager.default.createDirectory(at: fixture.directory, withIntermediateDirectories: true)
        // As if killed inside the creation: a stored key and the temporary file, never linked.
        let key = String(repeating: "3c", count: 32)
        let orphan = String(repeating: "ab", count: 16) + "@" + kdCanonical(fixture.path)
        try fixture.keychain.set(key, service: fixture.service, account: orphan)
        let temporary = fixture.directory.appendingPathComponent(".tasks.db.tmp-00ff").path
        #expect(FileManager.default.createFile(atPath: temporary, contents: Data(repeating: 1, count: 4096)))

        let database = try fixture.open()
        try kdFill(database)
        let id = database.databaseID
        try database.close()
        #expect(try fixture.files() == ["tasks.db"])
        // A stored key without a file may be a moved database's: it is kept, never reused for a new file.
        #expect(try fixture.storedHex(account: orphan) == key, "the stored key is neither replaced nor deleted")
        let own = try #require(try fixture.storedHex(account: id + "@" + kdCanonical(fixture.path)))
        #expect(own != key, "the new database has a key of its own")
        let reopened = try fixture.open()
        try kdExpectRows(reopened.queue)
        try reopened.close()
    }
}

// Recovery codes, plaintext import, backup and verification.
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import TestSupport
import Testing

@Suite(.serialized) struct KeyedDatabaseRecoveryTests {
    // MARK: Recovery codes

    @Test func aRecoveryCodeIsFourteenGroupsAndReadsBackForgivingly() throws {
        let key = DatabaseKey.random()
        let code = RecoveryCode.code(for: key)
        let text = try #require(code.stringValue())
        let groups = text.split(separator: "-")
        #expect(groups.count == 14)
        #expect(groups.allSatisfy { $0.count == 4 && $0.allSatisfy { RecoveryCode.alphabet.contains($0) } })
        #expect("\(code)" == "Secret(<redacted>)")
        #expect(try RecoveryCode.key(from: code) == key)

        // Lower case, spaces instead of dashes, O for 0 and I/L for 1 all read the same.
        let typed = text.lowercased().replacingOccurrences(of: "-", with: " ")
            .replacingOccurrences(of: "0", with: "o").replacingOccurrences(of: "1", with: "l")
        #expect(try RecoveryCode.key(from: Secret(string: typed)) == key)
    }

    @Test func aMistypedRecoveryCodeNamesTheGroupButNeverTheCode() throws {
        let code = try #require(RecoveryCode.code(for: DatabaseKey.random()).stringValue())
        var characters = Array(code)
        // Change the second character of group 6 to another letter of the alphabet.
        let position = 5 * 5 + 1
        characters[position] = characters[position] == "X" ? "Y" : "X"
        let typo = String(characters)
        let message = try #require(expectError(SecureStoreError.Code.invalidRecoveryCode) { try RecoveryCode.key(from: Secret(string: typo)) }?.message)
        #expect(message.contains("checksum"))
        #expect(message.contains("group 6"))
        for group in code.split(separator: "-") { #expect(!message.contains(group)) }

        let short = String(code.dropLast(5))
        let shortMessage = try #require(expectError(SecureStoreError.Code.invalidRecoveryCode) { try RecoveryCode.key(from: Secret(string: short)) }?.message)
        #expect(shortMessage.contains("has 52 letters and digits"))

        var bad = Array(code)
        bad[10] = "U"
        let badMessage = try #require(expectError(SecureStoreError.Code.invalidRecoveryCode) { try RecoveryCode.key(from: Secret(string: String(bad))) }?.message)
        #expect(badMessage.contains("character 1 of group 3"))

        // Two neighbouring characters swapped are caught too.
        var swapped = Array(code)
        if swapped[0] != swapped[1] {
            swapped.swapAt(0, 1)
            expectError(SecureStoreError.Code.invalidRecoveryCode) { try RecoveryCode.key(from: Secret(string: String(swapped))) }
        }
    }

    @Test func theRecoveryCodeRestoresALostKey() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let code = try database.recoveryCode()
        let hex = try fixture.storedHex()
        try database.close()
        #expect(try fixture.deleteCurrentKey())
        expectError(SecureStoreError.Code.missingKey) { try fixture.open() }

        let recovered = try KeyedDatabase.recover(paths: fixture.paths, name: "tasks", keychain: fixture.keychain, code: code)
        try kdExpectRows(recovered.queue)
        try recovered.close()
        #expect(try fixture.storedHex() == hex)
        let reopened = try fixture.open()
        try kdExpectRows(reopened.queue)
        try reopened.close()
    }

    @Test func aCodeThatDoesNotOpenTheDatabaseStoresNothing() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let code = try #require(try database.recoveryCode().stringValue())
        try database.close()
        #expect(try fixture.deleteCurrentKey())
        let before = try #require(kdBytes(fixture.path))

        // Well formed, but another key.
        let other = RecoveryCode.code(for: DatabaseKey.random())
        let message = try #require(expectError(SecureStoreError.Code.invalidRecoveryCode) {
            try KeyedDatabase.recover(paths: fixture.paths, name: "tasks", keychain: fixture.keychain, code: other)
        }?.message)
        #expect(message.contains("does not open"))
        #expect(message.contains("Nothing was stored"))
        #expect(try fixture.storedHex() == nil)

        // Mistyped.
        var typo = Array(code)
        typo[0] = typo[0] == "Z" ? "Y" : "Z"
        expectError(SecureStoreError.Code.invalidRecoveryCode) {
            try KeyedDatabase.recover(
                paths: fixture.paths, name: "tasks", keychain: fixture.keychain, code: Secret(string: String(typo)))
        }
        #expect(try fixture.storedHex() == nil)
        #expect(kdBytes(fixture.path) == before)
    }

    // MARK: Import

    @Test func aPlaintextDatabaseIsImportedWithItsRowsAndUserVersion() throws {
        let fixture = try KDFixture()
        try FileManager.default.createDirectory(at: fixture.directory, withIntermediateDirectories: true)
        let source = fixture.directory.appendingPathComponent("plain.sqlite").path
        var sql = "CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT NOT NULL);\nBEGIN;\n"
        for index in 0..<kdRowCount { sql += "INSERT INTO item VALUES (\(index), '\(kdTitle(index))');\n" }
        sql += "COMMIT;\nPRAGMA user_version = 7;\n"
        // The sqlcipher tool without a key writes a plaintext SQLite file.
        let made = try kdRun(["sqlcipher", source], input: Data(sql.utf8))
        #expect(made.status == 0, "\(made.stderr)")
        let sourceBytes = try #require(kdBytes(source))
        #expect(sourceBytes.prefix(15) == Data("SQLite format 3".utf8))

        let database = try KeyedDatabase.importPlaintext(
            from: URL(fileURLWithPath: source), paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        try kdExpectRows(database.queue)
        try database.close()
        #expect(kdBytes(source) == sourceBytes, "the source is left as it was")
        #expect(try kdMode(fixture.path) == 0o600)
        #expect(kdBytes(fixture.path)?.prefix(15) != Data("SQLite format 3".utf8))
        let reopened = try fixture.open()
        try kdExpectRows(reopened.queue)
        try reopened.close()

        // Never over an existing database.
        let existing = try #require(kdBytes(fixture.path))
        let message = try #require(expectError(SecureStoreError.Code.alreadyExists) {
            try KeyedDatabase.importPlaintext(
                from: URL(fileURLWithPath: source), paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        }?.message)
        #expect(message.contains("never replaces"))
        #expect(kdBytes(fixture.path) == existing)
    }

    @Test func importingSomethingThatIsNotPlaintextSQLiteStoresNoKey() throws {
        let fixture = try KDFixture()
        try FileManager.default.createDirectory(at: fixture.directory, withIntermediateDirectories: true)
        let source = fixture.directory.appendingPathComponent("notes.txt")
        try Data("just some text, not a database at all".utf8).write(to: source)
        let message = try #require(expectError(SecureStoreError.Code.invalidData) {
            try KeyedDatabase.importPlaintext(from: source, paths: fixture.paths, name: "tasks", keychain: fixture.keychain)
        }?.message)
        #expect(message.contains("not a plaintext SQLite database"))
        #expect(try fixture.storedHex() == nil)
        #expect(!FileManager.default.fileExists(atPath: fixture.path))
    }

    // MARK: Backup and verify

    @Test func aBackupOpensWithTheKeyAndVerifies() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let destination = fixture.directory.appendingPathComponent("backups/tasks-backup.db")

        let report = try database.backup(to: destination)
        #expect(report.path == destination.path)
        #expect(report.pageSize == 4096)
        #expect(report.size == report.pageCount * 4096)
        #expect(report.cipher.uppercased() == "AES-256-CBC")
        #expect(report.hmac)
        #expect(report.sqlcipherVersion == report.encryption.sqlcipherVersion)
        #expect(report.encryption.format.name == "securestore-1")
        #expect(report.encryption.hmacAlgorithm == "HMAC_SHA1")
        #expect(report.userVersion == 7)
        #expect(report.rowCount == kdRowCount)
        #expect(report.key == .current)
        let hex = try #require(try fixture.storedHex())
        #expect(!report.description.contains(hex))
        #expect(report.description.contains("integrity check: ok"))
        #expect(try kdMode(destination.path) == 0o600)

        // Verifying opens read-only: the backup is byte-identical and nothing is left beside it.
        let backupBytes = try #require(kdBytes(destination.path))
        _ = try database.verifyBackup(at: destination)
        #expect(kdBytes(destination.path) == backupBytes)
        #expect(try FileManager.default.contentsOfDirectory(atPath: destination.deletingLastPathComponent().path)
            == ["tasks-backup.db"])

        // The stored key opens it anywhere, as an ordinary SecureStore database.
        let copy = fixture.directory.appendingPathComponent("copy.db")
        try FileManager.default.copyItem(at: destination, to: copy)
        let queue = try DatabaseQueue(path: copy.path, key: try kdKey(hex: hex))
        try kdExpectRows(queue)
        try queue.close()

        // Never over an existing file.
        let message = try #require(expectError(SecureStoreError.Code.alreadyExists) { try database.backup(to: destination) }?.message)
        #expect(message.contains("never replaces"))
        #expect(kdBytes(destination.path) == backupBytes)

        let live = try database.verify()
        #expect(live.rowCount == kdRowCount)
        try database.close()
    }

    @Test func aDamagedBackupFailsVerificationClearly() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database, rows: 3000)
        let destination = fixture.directory.appendingPathComponent("damaged.db")
        let report = try database.backup(to: destination)
        #expect(report.pageCount > 4)

        // Flip bytes in the middle of page 3: its HMAC no longer matches.
        let handle = try FileHandle(forUpdating: destination)
        try handle.seek(toOffset: UInt64(2 * 4096 + 1000))
        try handle.write(contentsOf: Data(repeating: 0xFF, count: 64))
        try handle.close()
        let message = try #require(expectError(SecureStoreError.Code.verificationFailed) { try database.verifyBackup(at: destination) }?.message)
        #expect(message.contains(destination.path))
        #expect(message.contains("integrity") || message.contains("damaged"))

        // A file no stored key opens.
        let foreign = fixture.directory.appendingPathComponent("foreign.db").path
        let other = try DatabaseQueue(path: foreign, key: DatabaseKey.random())
        try other.write { db in try db.execute("CREATE TABLE t (x)") }
        try other.close()
        let foreignMessage = try #require(expectError(SecureStoreError.Code.verificationFailed) {
            try database.verifyBackup(at: URL(fileURLWithPath: foreign))
        }?.message)
        #expect(foreignMessage.contains("no stored key of database 'tasks' opens"))
        try database.close()
    }
}

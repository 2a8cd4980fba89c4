// Scenarios for the EncryptedDatabase module; see main.swift.
//
//   securestore-stress db write PATH KEY_HEX WRITER COUNT
//       Opens PATH with the 32-byte key given as 64 hex digits, applies the stress schema, then inserts
//       COUNT rows (WRITER, 0..<COUNT), each in its own write transaction. Exit 0 when every write succeeded,
//       1 with the error on stderr otherwise. Several of these run at once against one file.
import EncryptedDatabase
import Foundation

/// Runs one database scenario and returns the process exit status.
func runDatabaseStress(_ arguments: [String]) -> Int32 {
    guard let scenario = arguments.first else {
        return databaseStressUsage()
    }
    switch scenario {
    case "write":
        guard arguments.count == 5, let key = databaseKey(hex: arguments[2]), let writer = Int(arguments[3]),
            let count = Int(arguments[4])
        else { return databaseStressUsage() }
        do {
            let queue = try DatabaseQueue(path: arguments[1], key: key)
            var migrator = DatabaseMigrator()
            migrator.registerMigration("stress v1") { db in
                try db.execute(
                    "CREATE TABLE entry (writer INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (writer, n))")
            }
            try migrator.migrate(queue)
            for n in 0..<count {
                try queue.write { db in
                    try db.execute("INSERT INTO entry (writer, n) VALUES (?, ?)", [writer, n])
                }
            }
            try queue.close()
            return 0
        } catch {
            FileHandle.standardError.write(Data("securestore-stress db write: \(error)\n".utf8))
            return 1
        }
    default:
        return databaseStressUsage()
    }
}

private func databaseStressUsage() -> Int32 {
    FileHandle.standardError.write(Data("usage: securestore-stress db write PATH KEY_HEX WRITER COUNT\n".utf8))
    return 64
}

private func databaseKey(hex: String) -> DatabaseKey? {
    let digits = Array(hex.utf8)
    guard digits.count == 64 else { return nil }
    var bytes: [UInt8] = []
    for index in stride(from: 0, to: 64, by: 2) {
        guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
            return nil
        }
        bytes.append(byte)
    }
    defer { for index in bytes.indices { bytes[index] = 0 } }
    return try? DatabaseKey(bytes: bytes)
}

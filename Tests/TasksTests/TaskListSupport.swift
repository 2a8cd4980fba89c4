// Helpers of the task list tests (prefixed TL: other tests share this target).
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Tasks
import TestSupport
import Testing

/// A task list in a fresh encrypted file under a temporary directory, removed when released.
final class TLStore {
    private let temporary: TemporaryDirectory
    var directory: String { temporary.path }
    let path: String
    let key = DatabaseKey.random()
    private(set) var queue: DatabaseQueue
    private(set) var tasks: TaskList

    init() throws {
        temporary = try TemporaryDirectory()
        path = temporary.file("tasks.db")
        queue = try DatabaseQueue(path: path, key: key)
        tasks = try TaskList(queue: queue)
    }

    /// Closes the file and opens it again with a new connection (nothing cached in memory survives).
    @discardableResult
    func reopen() throws -> TaskList {
        try queue.close()
        queue = try DatabaseQueue(path: path, key: key)
        tasks = try TaskList(queue: queue)
        return tasks
    }

    deinit { try? queue.close() }
}

/// A date `seconds` after 2024-01-01 00:00:00 UTC.
func TLDate(_ seconds: Double) -> Date {
    Date(timeIntervalSince1970: 1_704_067_200 + seconds)
}

/// A UUID whose bytes start with the hex digits `hex` and continue with `fill`.
func TLUUID(_ hex: String, fill: UInt8 = 0x11) -> UUID {
    var bytes = [UInt8](repeating: fill, count: 16)
    let digits = Array(hex.utf8)
    for index in stride(from: 0, to: digits.count - 1, by: 2) {
        bytes[index / 2] = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16)!
    }
    if digits.count % 2 == 1 {
        let high = UInt8(String(decoding: [digits.last!], as: UTF8.self), radix: 16)!
        bytes[digits.count / 2] = high << 4 | (fill & 0x0F)
    }
    return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                       bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
}

/// A keyed database of a unique throw-away application in the harness's keyring, removed when released.
final class TLKeyedStore {
    let app = "tltest-\(UUID().uuidString.prefix(8).lowercased())"
    let directory: URL
    let keychain: Keychain
    let database: KeyedDatabase

    init(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let environment = ProcessInfo.processInfo.environment
        try #require(
            environment["SECURESTORE_HARNESS_ROOT"] != nil,
            "run the tests inside Tests/Harness/with-keyring, never against your own keyring",
            sourceLocation: sourceLocation)
        // Under KeePassXC this process must be approved for keys other processes stored.
        keychain = StoreClient.keychain
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(app, isDirectory: true)
        database = try KeyedDatabase(
            paths: try AppPaths(app: app, dataDirectory: directory), name: "tasks", keychain: keychain)
    }

    deinit {
        try? database.close()
        for account in (try? keychain.accounts(service: "\(app).database-key")) ?? [] {
            _ = try? keychain.delete(service: "\(app).database-key", account: account)
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

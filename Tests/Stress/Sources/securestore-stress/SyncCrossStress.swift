// securestore-stress sync init|join|check DIR NAME
//
// Two devices on two SQLCipher versions syncing one task list through a folder: `make test-debian13` runs `init`
// and later `check` on Debian 12 (SQLCipher 3.4), `join` on Debian 13 (SQLCipher 4.6), with DIR shared by both.
// THE KEYS ARE PUBLIC TEST KEYS: each device's key file is sealed with a public test passphrase, and the pairing
// code is left in DIR/pairing-code for the other side. These files protect nothing.
//
//   init DIR NAME    device NAME (DIR/NAME) starts the sync group DIR/remote: three tasks, synced; then renames
//                    the second one without syncing (the edit that will lose against the other device's later one).
//   join DIR NAME    device NAME joins with DIR/pairing-code, checks it received the three tasks, completes the
//                    first, deletes the third, renames the second (later: it wins), adds one, syncs; writes its rows
//                    to DIR/rows-NAME.
//   check DIR NAME   device NAME syncs again: its rows must be the other device's (DIR/rows-*) and the expected
//                    ones, with one conflict logged (its own losing rename); prints "sync cross ok: …".
//
// securestore-stress sync offline DIR N | catch-up DIR N
//
//   offline DIR N    device "online" starts a group in DIR/remote, device "offline" joins it and syncs once; then
//                    "online" makes N changes (new tasks, N/10 a sync), syncing as it goes.
//   catch-up DIR N   device "offline" syncs: it must end with the N tasks; prints "caught up: N tasks, peak RSS K kB"
//                    (VmHWM of this process, /proc/self/status, reset after the key file is unlocked), for
//                    SyncOfflineTests to hold under a fixed bound;
//                    its page cache is 4 MiB (64 MiB by default: a bound too, reached only by a larger database).
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Sync
import Tasks

private let testPassphrase = "SecureStore public test passphrase"
private let ids = (1...4).map { UUID(uuidString: "00000000-0000-4000-8000-00000000000\($0)")! }
private let createdAt = Date(timeIntervalSince1970: 1_700_000_000)

private struct SyncCrossFailure: Error, CustomStringConvertible {
    let description: String
}

/// One device: its own data directory and key file under DIR/NAME.
private struct CrossDevice {
    let database: KeyedDatabase
    let tasks: TaskList
    let version: String

    init(_ directory: String, _ name: String, cacheSizeKiB: Int? = nil) throws {
        let home = directory + "/" + name
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let file = KeyFile(
            path: home + "/keys.sealed", passphrase: .provider { _ in Secret(string: testPassphrase) },
            sessionCacheTimeout: nil)
        let keychain = Keychain(configuration: Keychain.Configuration(store: .keyFile(file)))
        let paths = try AppPaths(app: "securestore-sync-cross", dataDirectory: URL(fileURLWithPath: home + "/data"))
        var configuration = DatabaseConfiguration()
        if let cacheSizeKiB { configuration.cacheSizeKiB = cacheSizeKiB }
        database = try KeyedDatabase(paths: paths, name: "tasks", keychain: keychain, configuration: configuration)
        tasks = try TaskList(database: database)
        version = try database.read { db in try db.fetchOne("PRAGMA cipher_version") { try $0.string(at: 0) } } ?? "?"
    }

    /// Every task as a line, by ID.
    func rows() throws -> [String] {
        try tasks.list(order: .oldestFirst, limit: 100).sorted { $0.id.uuidString < $1.id.uuidString }
            .map { "\($0.id.uuidString) \($0.done ? "done" : "open") \($0.title)" }
    }
}

func runSyncCrossStress(_ arguments: [String]) -> Int32 {
    guard arguments.count == 3, ["init", "join", "check", "offline", "catch-up"].contains(arguments[0]) else {
        FileHandle.standardError.write(Data("usage: securestore-stress sync init|join|check DIR NAME | offline|catch-up DIR N\n".utf8))
        return 64
    }
    let (directory, name) = (arguments[1], arguments[2])
    do {
        switch arguments[0] {
        case "init": try syncInit(directory, name)
        case "join": try syncJoin(directory, name)
        case "offline": try syncOffline(directory, Int(name) ?? 0)
        case "catch-up": try syncCatchUp(directory, Int(name) ?? 0)
        default: try syncCheck(directory, name)
        }
        return 0
    } catch {
        FileHandle.standardError.write(Data("sync \(arguments[0]) on \(name): \(error)\n".utf8))
        return 1
    }
}

private func syncInit(_ directory: String, _ name: String) throws {
    let device = try CrossDevice(directory, name)
    let (engine, code) = try SyncEngine.initialize(
        database: device.database, remote: .folder(directory + "/remote"), tables: ["tasks"])
    for (index, title) in ["written on \(name)", "Écrire le rapport ✍️", "to delete"].enumerated() {
        _ = try device.tasks.create(title: title, createdAt: createdAt, id: ids[index])
    }
    _ = try engine.sync()
    _ = try device.tasks.rename(id: ids[1], to: "renamed on \(name), not synced (loses)")
    let text = code.withUnsafeBytes { Data($0) }
    try text.write(to: URL(fileURLWithPath: directory + "/pairing-code"))
    print("sync init ok on \(name): SQLCipher \(device.version)")
}

private func syncJoin(_ directory: String, _ name: String) throws {
    let device = try CrossDevice(directory, name)
    let code = Secret(data: try Data(contentsOf: URL(fileURLWithPath: directory + "/pairing-code")))
    let engine = try SyncEngine.join(
        database: device.database, remote: .folder(directory + "/remote"), tables: ["tasks"], pairingCode: code)
    _ = try engine.sync()
    let received = try device.rows()
    guard received.count == 3, received.contains(where: { $0.hasSuffix("Écrire le rapport ✍️") }) else {
        throw SyncCrossFailure(description: "after joining, rows \(received), expected the other device's three tasks")
    }
    _ = try device.tasks.setDone(true, id: ids[0])
    _ = try device.tasks.delete(id: ids[2])
    _ = try device.tasks.rename(id: ids[1], to: "renamed on \(name) (wins)")
    _ = try device.tasks.create(title: "written on \(name)", createdAt: createdAt, id: ids[3])
    _ = try engine.sync()
    let rows = try device.rows()
    try Data((rows.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: directory + "/rows-" + name))
    try Data(device.version.utf8).write(to: URL(fileURLWithPath: directory + "/version-" + name))
    print("sync join ok on \(name): SQLCipher \(device.version)")
}

private func syncCheck(_ directory: String, _ name: String) throws {
    let device = try CrossDevice(directory, name)
    let engine = try SyncEngine(database: device.database)
    _ = try engine.sync()
    let rows = try device.rows()
    let others = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("rows-") }
    guard let other = others.first, others.count == 1 else {
        throw SyncCrossFailure(description: "expected one rows-* file from the other device in \(directory), found \(others)")
    }
    let otherName = String(other.dropFirst("rows-".count))
    let otherRows = String(decoding: try Data(contentsOf: URL(fileURLWithPath: directory + "/" + other)), as: UTF8.self)
        .split(separator: "\n").map(String.init)
    let expected = [
        "\(ids[0].uuidString) done written on \(name)",
        "\(ids[1].uuidString) open renamed on \(otherName) (wins)",
        "\(ids[3].uuidString) open written on \(otherName)",
    ]
    guard rows == expected, otherRows == expected else {
        throw SyncCrossFailure(description: "rows here \(rows), on \(otherName) \(otherRows), expected \(expected)")
    }
    let conflicts = try engine.conflicts()
    guard conflicts.count == 1, conflicts[0].column == "title" else {
        throw SyncCrossFailure(description: "expected one title conflict (this device's losing rename), found \(conflicts)")
    }
    let otherVersion = String(
        decoding: (try? Data(contentsOf: URL(fileURLWithPath: directory + "/version-" + otherName))) ?? Data(),
        as: UTF8.self)
    print("sync cross ok: \(name) (SQLCipher \(device.version)) and \(otherName) (SQLCipher \(otherVersion)) converged")
}

private func syncOffline(_ directory: String, _ count: Int) throws {
    let online = try CrossDevice(directory, "online")
    let (engine, code) = try SyncEngine.initialize(
        database: online.database, remote: .folder(directory + "/remote"), tables: ["tasks"])
    _ = try engine.sync()
    let offline = try CrossDevice(directory, "offline")
    _ = try SyncEngine.join(database: offline.database, remote: .folder(directory + "/remote"), tables: ["tasks"], pairingCode: code).sync()
    try offline.database.close()
    let batch = max(1, count / 10)
    var made = 0
    while made < count {
        let size = min(batch, count - made)
        _ = try online.tasks.insert((made..<(made + size)).map { TaskItem(title: "offline change \($0)", createdAt: createdAt) })
        made += size
        _ = try engine.sync()
    }
    print("offline: \(count) changes synced by the online device")
}

private func syncCatchUp(_ directory: String, _ count: Int) throws {
    // A 4 MiB page cache (64 MiB by default) so that its limit is reached at any size the test uses: what is left
    // to grow with the number of changes is the engine's own memory.
    let device = try CrossDevice(directory, "offline", cacheSizeKiB: 4096)
    // The peak from here on (proc(5), clear_refs 5): unlocking the key file above took scrypt's 128 MiB once, which is
    // the key store's, not the sync's, and would otherwise hide what the sync itself takes.
    try? Data("5".utf8).write(to: URL(fileURLWithPath: "/proc/self/clear_refs"))
    let report = try SyncEngine(database: device.database).sync()
    let found = try device.tasks.count()
    guard found == count else {
        throw SyncCrossFailure(description: "after catching up, \(found) tasks, expected \(count) (\(report))")
    }
    let status = String(decoding: (try? Data(contentsOf: URL(fileURLWithPath: "/proc/self/status"))) ?? Data(), as: UTF8.self)
    let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }?
        .split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "?"
    print("caught up: \(found) tasks in \(report.appliedBundles) bundles, peak RSS \(peak) kB")
}

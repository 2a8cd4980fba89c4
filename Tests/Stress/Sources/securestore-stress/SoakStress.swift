// Crash-safety scenarios for the reliability tests and the soak (Tests/Soak/run-soak.sh); see main.swift.
//
// A writer is killed with SIGKILL at a random moment and a checker then opens what it left. So that the
// checker knows what must be there, every writer appends to a LOG file with one write(2) per line on an
// O_APPEND descriptor: a line written before the kill is in the kernel and survives the process. For each
// write the writer logs what it is about to do ("attempt") and, only after the call returned, that it is
// done ("commit"). A committed write must be present after the kill; an attempt without its commit (the
// one in flight) may be present or not, but all of it or none of it.
//
//   securestore-stress soak tasks DATA_DIR APP LOG [COUNT]
//       Opens (or creates) the keyed database `tasks` of APP in DATA_DIR through KeyedDatabase and TaskList,
//       then loops (COUNT times, or until killed): add a batch of 1–4 tasks in one transaction (log
//       `A id,id…` then `C id,id…`), set a committed task's done flag (`a ID 0|1` then `c ID 0|1`), or
//       checkpoint the WAL (`P` then `p`), so that kills land mid-transaction and mid-checkpoint. Titles hold
//       the marker `soak-plaintext-marker` (the hygiene tests scan the files for it). Exit 0 after COUNT.
//
//   securestore-stress soak rotate DATA_DIR APP
//       Opens the same database and rotates its key in a loop until killed (kills land at any moment of a
//       rotation, not only between its steps). Logs nothing: rotation must keep every row, which the tasks
//       log checks.
//
//   securestore-stress soak check-tasks DATA_DIR APP LOG
//       Opens the database with the stored key (finishing or undoing an interrupted rotation), runs
//       integrity_check, reads every task and compares with LOG. Prints one line
//       `check-tasks opened=0|1 committed=N present=N lost=N uncommitted=N partial=N stale=N` and exits 0
//       when the file opened and nothing is wrong, 1 otherwise (the reason on stderr). `lost`: committed
//       tasks missing; `uncommitted`: tasks present that were never attempted; `partial`: interrupted batches
//       present in part; `stale`: a committed done flag that reads back otherwise.
//
//   securestore-stress soak restore DATA_DIR APP BACKUP
//       Restores BACKUP (a backup of a database of `item` rows, see `soak make-backup`) as the database `tasks`
//       of APP in DATA_DIR, in a loop until killed: kills land at any moment of a restore.
//
//   securestore-stress soak make-backup DATA_DIR APP BACKUP ROWS
//       Creates the database `tasks` of APP in DATA_DIR with ROWS rows in `item` and backs it up to BACKUP.
//
//   securestore-stress soak check-restore DATA_DIR APP BACKUP ROWS
//       Opens the database `tasks` and the newest set-aside database (`tasks.before-restore-*`); each must open,
//       pass integrity_check and hold ROWS rows (every version of it is a restore of the same backup). Prints
//       `check-restore opened=0|1 asides=N lost=N` and exits 0 when all is well.
//
//   securestore-stress soak upgrade DATA_DIR APP
//       In a loop until killed: writes a database as SecureStore 0.1 did (key item `<app>.database-key` /
//       `uN`, file `uN.db` with 20 rows and no database id), marks it complete (`uN.ready`, fsynced), then opens
//       it through KeyedDatabase, which upgrades its key item. Kills land inside the upgrade.
//
//   securestore-stress soak check-upgrade DATA_DIR APP
//       Opens every complete `uN` database; each must open with its 20 rows and have exactly one current key
//       item for its path. Prints `check-upgrade opened=0|1 databases=N lost=N` and exits 0 when all is well.
//
//   securestore-stress soak prefs DIR DOMAIN LOG
//       Saves forever through Preferences: `counter` = n (n = 1, 2, …) plus a 10–40 KiB blob, logging `C n`
//       after each save returned (and, first, the counter it found on disk: a killed writer's last save).
//
//   securestore-stress soak attach DATA_DIR APP LOG / check-attach DATA_DIR APP LOG
//       Attach and detach, killed at any moment, then checked: see AttachmentSoakStress.swift.
//
//   securestore-stress soak check-prefs DIR DOMAIN LOG
//       Opens the domain and prints `check-prefs opened=0|1 committed=N counter=N lost=N`; the counter must
//       be the last committed one or the one after it (in flight). Exit 0 when so, 1 otherwise.
import EncryptedDatabase
import Foundation
import Keychain
import Preferences
import SecureStore
import Tasks

import Glibc

/// Runs one soak scenario and returns the process exit status.
func runSoakStress(_ arguments: [String]) -> Int32 {
    do {
        switch (arguments.first, arguments.count) {
        case ("tasks", 4), ("tasks", 5):
            let count = arguments.count == 5 ? Int(arguments[4]) : nil
            if arguments.count == 5 && count == nil { return soakUsage() }
            try soakTasks(dataDirectory: arguments[1], app: arguments[2], log: arguments[3], count: count)
            return 0
        case ("rotate", 3):
            let database = try soakOpen(dataDirectory: arguments[1], app: arguments[2])
            while true { try database.rotateKey() }
        case ("check-tasks", 4):
            return soakCheckTasks(dataDirectory: arguments[1], app: arguments[2], log: arguments[3])
        case ("restore", 4):
            let paths = try AppPaths(app: arguments[2], dataDirectory: URL(fileURLWithPath: arguments[1], isDirectory: true))
            while true {
                try KeyedDatabase.restore(
                    from: URL(fileURLWithPath: arguments[3]), paths: paths, name: "tasks", keychain: stressKeychain())
            }
        case ("make-backup", 5):
            guard let rows = Int(arguments[4]) else { return soakUsage() }
            let database = try soakOpen(dataDirectory: arguments[1], app: arguments[2])
            try database.queue.write { db in
                try db.execute("CREATE TABLE item (n INTEGER NOT NULL)")
                for n in 0..<rows { try db.execute("INSERT INTO item (n) VALUES (?)", [n]) }
            }
            _ = try database.backup(to: URL(fileURLWithPath: arguments[3]))
            try database.close()
            return 0
        case ("check-restore", 5):
            guard let rows = Int(arguments[4]) else { return soakUsage() }
            return soakCheckRestore(dataDirectory: arguments[1], app: arguments[2], rows: rows)
        case ("upgrade", 3):
            try soakUpgrade(dataDirectory: arguments[1], app: arguments[2])
            return 0
        case ("check-upgrade", 3):
            return soakCheckUpgrade(dataDirectory: arguments[1], app: arguments[2])
        case ("prefs", 4):
            try soakPreferences(directory: arguments[1], domain: arguments[2], log: arguments[3])
            return 0
        case ("check-prefs", 4):
            return soakCheckPreferences(directory: arguments[1], domain: arguments[2], log: arguments[3])
        case ("attach", 4):
            try soakAttach(dataDirectory: arguments[1], app: arguments[2], log: arguments[3])
            return 0
        case ("check-attach", 4):
            return soakCheckAttach(dataDirectory: arguments[1], app: arguments[2], log: arguments[3])
        default:
            return soakUsage()
        }
    } catch {
        FileHandle.standardError.write(Data("securestore-stress soak \(arguments.first ?? ""): \(error)\n".utf8))
        return 1
    }
}

private func soakUsage() -> Int32 {
    FileHandle.standardError.write(
        Data(
            """
            usage: securestore-stress soak tasks DATA_DIR APP LOG [COUNT]
                   securestore-stress soak rotate DATA_DIR APP
                   securestore-stress soak check-tasks DATA_DIR APP LOG
                   securestore-stress soak restore DATA_DIR APP BACKUP
                   securestore-stress soak make-backup DATA_DIR APP BACKUP ROWS
                   securestore-stress soak check-restore DATA_DIR APP BACKUP ROWS
                   securestore-stress soak upgrade DATA_DIR APP
                   securestore-stress soak check-upgrade DATA_DIR APP
                   securestore-stress soak prefs DIR DOMAIN LOG
                   securestore-stress soak check-prefs DIR DOMAIN LOG
                   securestore-stress soak attach DATA_DIR APP LOG
                   securestore-stress soak check-attach DATA_DIR APP LOG

            """.utf8))
    return 64
}

/// The marker every soak task title carries.
let soakMarker = "soak-plaintext-marker"

/// An append-only log: one write(2) per line, so a line is either wholly in the file or not at all.
struct SoakLog {
    let descriptor: Int32

    init(_ path: String) throws {
        descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw SecureStoreError(SecureStoreError.Code.fileSystem, "cannot open the log \(path): errno \(errno)")
        }
    }

    func append(_ line: String) throws {
        let bytes = Array((line + "\n").utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count else {
            throw SecureStoreError(SecureStoreError.Code.fileSystem, "cannot append to the log: errno \(errno)")
        }
    }
}

private func soakOpen(dataDirectory: String, app: String) throws -> KeyedDatabase {
    let paths = try AppPaths(app: app, dataDirectory: URL(fileURLWithPath: dataDirectory, isDirectory: true))
    return try KeyedDatabase(paths: paths, name: "tasks", keychain: stressKeychain())
}

private func soakTasks(dataDirectory: String, app: String, log path: String, count: Int?) throws {
    let log = try SoakLog(path)
    let database = try soakOpen(dataDirectory: dataDirectory, app: app)
    let tasks = try TaskList(database: database)
    var committed: [UUID] = []
    var step = 0
    while count.map({ step < $0 }) ?? true {
        step += 1
        let choice = Int.random(in: 0..<10)
        if choice < 6 || committed.isEmpty {
            let batch = (0..<Int.random(in: 1...4)).map { _ in
                TaskItem(title: "\(soakMarker) \(step) \(UUID().uuidString.prefix(8))")
            }
            let ids = batch.map(\.id.uuidString).joined(separator: ",")
            try log.append("A \(ids)")
            try tasks.insert(batch)
            try log.append("C \(ids)")
            committed += batch.map(\.id)
        } else if choice < 9 {
            let id = committed.randomElement()!
            let done = Bool.random()
            try log.append("a \(id.uuidString) \(done ? 1 : 0)")
            _ = try tasks.setDone(done, id: id)
            try log.append("c \(id.uuidString) \(done ? 1 : 0)")
        } else {
            try log.append("P")
            try database.queue.checkpoint()
            try log.append("p")
        }
    }
    try database.close()
}

/// What the tasks log says must be (and may be) in the database.
private struct SoakTasksLog {
    var committed: Set<UUID> = []
    var attempted: Set<UUID> = []
    /// Batches attempted without a commit line (a kill interrupted them): each all present or none.
    var abandonedBatches: [[UUID]] = []
    /// The last committed done flag of each task, and the flags of later attempts a kill interrupted
    /// (each may or may not have committed).
    var done: [UUID: Bool] = [:]
    var maybeDone: [UUID: Set<Bool>] = [:]

    private enum Open { case batch([UUID]), flag(UUID, Bool) }

    init(_ path: String) throws {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        var open: Open? = nil
        func abandon() {
            switch open {
            case .batch(let ids)?: abandonedBatches.append(ids)
            case .flag(let id, let value)?: maybeDone[id, default: []].insert(value)
            case nil: break
            }
            open = nil
        }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let kind = fields.first else { continue }
            let ids = fields.count > 1 ? fields[1].split(separator: ",").compactMap { UUID(uuidString: String($0)) } : []
            switch kind {
            case "A":
                abandon()
                attempted.formUnion(ids)
                open = .batch(ids)
            case "C":
                committed.formUnion(ids)
                for id in ids { done[id] = false }
                open = nil
            case "a":
                abandon()
                if let id = ids.first, fields.count == 3 { open = .flag(id, fields[2] == "1") }
            case "c":
                if let id = ids.first, fields.count == 3 {
                    done[id] = fields[2] == "1"
                    maybeDone[id] = nil  // a later commit decides, whatever the interrupted one did
                }
                open = nil
            case "P":
                abandon()
            default:
                open = nil
            }
        }
        abandon()
    }
}

private func soakCheckTasks(dataDirectory: String, app: String, log path: String) -> Int32 {
    let expected: SoakTasksLog
    do { expected = try SoakTasksLog(path) } catch {
        FileHandle.standardError.write(Data("check-tasks: cannot read the log: \(error)\n".utf8))
        return 1
    }
    var present: [UUID: Bool] = [:]
    do {
        let database = try soakOpen(dataDirectory: dataDirectory, app: app)
        try database.queue.integrityCheck()
        let tasks = try TaskList(database: database)
        for task in try tasks.list(limit: 10_000_000) { present[task.id] = task.done }
        try database.close()
    } catch {
        print("check-tasks opened=0 committed=\(expected.committed.count) present=0 lost=\(expected.committed.count) uncommitted=0 partial=0 stale=0")
        FileHandle.standardError.write(Data("check-tasks: the database does not open or is damaged: \(error)\n".utf8))
        return 1
    }
    let lost = expected.committed.filter { present[$0] == nil }.count
    let uncommitted = present.keys.filter { !expected.attempted.contains($0) }.count
    let partial = expected.abandonedBatches.filter { batch in
        let found = batch.filter { present[$0] != nil }.count
        return found != 0 && found != batch.count
    }.count
    var stale = 0
    for (id, done) in expected.done {
        guard let actual = present[id] else { continue }
        if actual != done && !(expected.maybeDone[id]?.contains(actual) ?? false) { stale += 1 }
    }
    print("check-tasks opened=1 committed=\(expected.committed.count) present=\(present.count) lost=\(lost) uncommitted=\(uncommitted) partial=\(partial) stale=\(stale)")
    if lost + uncommitted + partial + stale > 0 {
        FileHandle.standardError.write(Data("check-tasks: the database does not hold exactly the committed writes\n".utf8))
        return 1
    }
    return 0
}

/// The rows of `item` in the database `name`, opened as a user would (never created).
private func soakItemCount(_ paths: AppPaths, _ name: String) throws -> Int {
    let database = try KeyedDatabase(paths: paths, name: name, keychain: stressKeychain(), createIfMissing: false)
    defer { try? database.close() }
    try database.queue.integrityCheck()
    return try database.queue.read { try $0.scalar("SELECT count(*) FROM item", as: Int.self) } ?? -1
}

private func soakCheckRestore(dataDirectory: String, app: String, rows: Int) -> Int32 {
    do {
        let paths = try AppPaths(app: app, dataDirectory: URL(fileURLWithPath: dataDirectory, isDirectory: true))
        let asides = try FileManager.default.contentsOfDirectory(atPath: dataDirectory)
            .filter { $0.hasPrefix("tasks.before-restore-") && $0.hasSuffix(".db") }.sorted()
        var lost = 0
        for name in ["tasks"] + asides.suffix(1).map({ String($0.dropLast(3)) }) {
            let count = try soakItemCount(paths, name)
            if count != rows {
                lost += 1
                FileHandle.standardError.write(Data("check-restore: \(name) holds \(count) rows, not \(rows)\n".utf8))
            }
        }
        print("check-restore opened=1 asides=\(asides.count) lost=\(lost)")
        return lost == 0 ? 0 : 1
    } catch {
        print("check-restore opened=0 asides=0 lost=0")
        FileHandle.standardError.write(Data("check-restore: a database does not open: \(error)\n".utf8))
        return 1
    }
}

private func soakUpgrade(dataDirectory: String, app: String) throws {
    let paths = try AppPaths(app: app, dataDirectory: URL(fileURLWithPath: dataDirectory, isDirectory: true))
    try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
    let keychain = stressKeychain()
    var n = 0
    while FileManager.default.fileExists(atPath: dataDirectory + "/u\(n).db") { n += 1 }
    while true {
        let name = "u\(n)"
        // As SecureStore 0.1 did: the key stored under the name, then the file made under it.
        let key = DatabaseKey.random()
        let hex = key.withUnsafeBytes { bytes in bytes.map { String(format: "%02x", $0) }.joined() }
        try keychain.set(hex, service: paths.databaseKeyService, account: name)
        let queue = try DatabaseQueue(path: paths.databaseURL(name: name).path, key: key)
        try queue.write { db in
            try db.execute("CREATE TABLE item (n INTEGER NOT NULL)")
            for row in 0..<20 { try db.execute("INSERT INTO item (n) VALUES (?)", [row]) }
        }
        try queue.checkpoint()
        try queue.close()
        let ready = dataDirectory + "/\(name).ready"
        _ = FileManager.default.createFile(atPath: ready, contents: Data())
        let descriptor = open(ready, O_RDONLY)
        if descriptor >= 0 { fsync(descriptor); close(descriptor) }
        // The upgrade: the first open through KeyedDatabase.
        try KeyedDatabase(paths: paths, name: name, keychain: keychain, createIfMissing: false).close()
        n += 1
    }
}

private func soakCheckUpgrade(dataDirectory: String, app: String) -> Int32 {
    do {
        let paths = try AppPaths(app: app, dataDirectory: URL(fileURLWithPath: dataDirectory, isDirectory: true))
        let ready = ((try? FileManager.default.contentsOfDirectory(atPath: dataDirectory)) ?? [])
            .filter { $0.hasSuffix(".ready") }.map { String($0.dropLast(6)) }.sorted()
        var lost = 0
        for name in ready {
            let count = try soakItemCount(paths, name)
            let canonical = URL(fileURLWithPath: dataDirectory).resolvingSymlinksInPath().path + "/\(name).db"
            let items = try KeyedDatabase.keys(paths: paths, keychain: stressKeychain())
                .filter { $0.role == .current && $0.path == canonical }
            if count != 20 || items.count != 1 {
                lost += 1
                FileHandle.standardError.write(
                    Data("check-upgrade: \(name) holds \(count) rows and \(items.count) current key items\n".utf8))
            }
        }
        print("check-upgrade opened=1 databases=\(ready.count) lost=\(lost)")
        return lost == 0 ? 0 : 1
    } catch {
        print("check-upgrade opened=0 databases=0 lost=0")
        FileHandle.standardError.write(Data("check-upgrade: a database does not open: \(error)\n".utf8))
        return 1
    }
}

private func soakLocation(_ directory: String, _ domain: String) throws -> PreferencesLocation {
    try PreferencesLocation(directory: URL(fileURLWithPath: directory, isDirectory: true), domain: domain)
}

private let soakPreferencesLimits = PreferencesLimits(
    maxValueSize: 64 * 1024, softTotalSize: 512 * 1024, hardTotalSize: 1024 * 1024)

private func soakPreferences(directory: String, domain: String, log path: String) throws {
    let log = try SoakLog(path)
    let prefs = try Preferences(location: soakLocation(directory, domain), limits: soakPreferencesLimits)
    // What a previous writer saved and was killed before logging is on disk, so committed: log it first, or a
    // later check would count this writer's in-flight save as two ahead of the log.
    try log.append("C \(prefs.get("counter", default: 0))")
    let blobs = (0..<4).map { digit in String(repeating: Character(String(digit)), count: Int.random(in: 10_000...40_000)) }
    while true {
        var saved = 0
        try prefs.update { values in
            var counter = 0
            if case .int(let stored)? = values["counter"] { counter = stored }
            saved = counter + 1
            values["counter"] = .int(saved)
            values["blob-\(saved % 4)"] = .string(blobs[saved % 4])
        }
        try log.append("C \(saved)")
    }
}

private func soakCheckPreferences(directory: String, domain: String, log path: String) -> Int32 {
    let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    let committed = text.split(separator: "\n").last.flatMap { Int($0.dropFirst(2)) } ?? 0
    let counter: Int
    do {
        let prefs = try Preferences(location: soakLocation(directory, domain), limits: soakPreferencesLimits)
        counter = prefs.get("counter", default: 0)
    } catch {
        print("check-prefs opened=0 committed=\(committed) counter=0 lost=\(committed > 0 ? 1 : 0)")
        FileHandle.standardError.write(Data("check-prefs: the preferences file does not open: \(error)\n".utf8))
        return 1
    }
    let lost = counter < committed ? 1 : 0
    print("check-prefs opened=1 committed=\(committed) counter=\(counter) lost=\(lost)")
    if counter < committed || counter > committed + 1 {
        FileHandle.standardError.write(Data("check-prefs: the counter is neither the committed one nor the next\n".utf8))
        return 1
    }
    return 0
}

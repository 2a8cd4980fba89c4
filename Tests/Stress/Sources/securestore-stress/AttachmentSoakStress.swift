// The attachments' part of the soak (Tests/Soak/run-soak.sh): attach and detach through the task list's
// attachments, killed with SIGKILL at a random moment, then checked. See SoakStress.swift for the log protocol.
//
//   securestore-stress soak attach DATA_DIR APP LOG
//       Opens (or creates) the keyed database `tasks` of APP in DATA_DIR and its task list (one task, made on the
//       first run), then loops until killed: attach (7 in 10; logs `A NAME` then `C NAME ID`) an attachment of
//       1 KB to 12 MB (1 in 5 over the 8 MiB of one chunk transaction) whose bytes come from a seeded generator
//       named in NAME (`s<seed>-<size>.bin`), or detach (3 in 10; `d ID` then `e ID`) a committed one.
//
//   securestore-stress soak check-attach DATA_DIR APP LOG
//       Opens the database as an application would (leftover chunks of a killed upload are collected when the
//       attachments file is first opened), reads every attachment of the task back in full and compares it byte
//       for byte with the generator (the store checks the SHA-256 digest too), then asks for a collection once
//       more. Prints `check-attach opened=0|1 committed=N present=N lost=N uncommitted=N damaged=N stale=N
//       leftover=N` and exits 0 when nothing is wrong. lost: committed attachments (not detached) missing;
//       uncommitted: present attachments never attempted; damaged: present attachments that do not read back
//       whole and right; stale: attachments whose detach returned but that are still there; leftover: chunks the
//       last collection still found (a collection at open should have taken them).
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Tasks

import Glibc

/// Deterministic bytes from a seed (xorshift64*): the checker makes the same bytes again to compare.
struct SoakBytes {
    private var state: UInt64

    init(seed: UInt64) { state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed }

    mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        var offset = 0
        while offset < buffer.count {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            var word = (state &* 0x2545_F491_4F6C_DD1D).littleEndian
            let count = min(8, buffer.count - offset)
            withUnsafeBytes(of: &word) { buffer.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: count) }
            offset += count
        }
    }

    static func data(seed: UInt64, size: Int) -> Data {
        var generator = SoakBytes(seed: seed)
        var data = Data(count: size)
        data.withUnsafeMutableBytes { generator.fill($0) }
        return data
    }

    /// The seed and size in a name `s<seed>-<size>.bin`.
    static func parse(_ name: String) -> (seed: UInt64, size: Int)? {
        guard name.hasPrefix("s"), name.hasSuffix(".bin") else { return nil }
        let parts = name.dropFirst().dropLast(4).split(separator: "-")
        guard parts.count == 2, let seed = UInt64(parts[0]), let size = Int(parts[1]) else { return nil }
        return (seed, size)
    }
}

private func attachSoakOpen(dataDirectory: String, app: String) throws -> (KeyedDatabase, TaskList, UUID) {
    let paths = try AppPaths(app: app, dataDirectory: URL(fileURLWithPath: dataDirectory, isDirectory: true))
    let database = try KeyedDatabase(paths: paths, name: "tasks", keychain: stressKeychain())
    let tasks = try TaskList(database: database)
    if let task = try tasks.list(order: .oldestFirst).first { return (database, tasks, task.id) }
    return (database, tasks, try tasks.create(title: "attachments soak").id)
}

/// The `soak attach` writer.
func soakAttach(dataDirectory: String, app: String, log path: String) throws {
    let log = try SoakLog(path)
    let (_, tasks, task) = try attachSoakOpen(dataDirectory: dataDirectory, app: app)
    let files = tasks.attachments()
    var committed = try files.list(of: task).map(\.id)
    while true {
        if Int.random(in: 0..<10) < 7 || committed.isEmpty {
            // One in five over one 8 MiB chunk transaction, one in five small enough to be kept inline in the
            // record database (up to 64 KiB), the rest between.
            let roll = Int.random(in: 0..<5)
            let size = roll == 0
                ? Int.random(in: (9 << 20)...(12 << 20)) : roll == 1 ? Int.random(in: 1...65_536) : Int.random(in: 1_000...3_000_000)
            let seed = UInt64.random(in: 1...UInt64.max)
            let name = "s\(seed)-\(size).bin"
            let bytes = SoakBytes.data(seed: seed, size: size)
            try log.append("A \(name)")
            let added = try files.add([.data(bytes, name: name)], to: task)[0]
            try log.append("C \(name) \(added.hexID)")
            committed.append(added.id)
        } else {
            let index = Int.random(in: 0..<committed.count)
            let id = committed.remove(at: index)
            let hex = withUnsafeBytes(of: id.uuid) { $0.map { String(format: "%02x", $0) }.joined() }
            try log.append("d \(hex)")
            try files.delete(id: id)
            try log.append("e \(hex)")
        }
    }
}

/// The `soak check-attach` checker.
func soakCheckAttach(dataDirectory: String, app: String, log path: String) -> Int32 {
    let lines = ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n")
    var attempted = Set<String>(), committed: [String: String] = [:], detaching = Set<String>(), detached = Set<String>()
    for line in lines {
        let parts = line.split(separator: " ").map(String.init)
        switch (parts.first, parts.count) {
        case ("A", 2): attempted.insert(parts[1])
        case ("C", 3): committed[parts[1]] = parts[2]
        case ("d", 2): detaching.insert(parts[1])
        case ("e", 2): detached.insert(parts[1])
        default: break
        }
    }
    var present = 0, lost = 0, uncommitted = 0, damaged = 0, stale = 0, leftover = 0
    func report(opened: Bool) -> Int32 {
        print("check-attach opened=\(opened ? 1 : 0) committed=\(committed.count) present=\(present) lost=\(lost) "
            + "uncommitted=\(uncommitted) damaged=\(damaged) stale=\(stale) leftover=\(leftover)")
        return opened && lost + uncommitted + damaged + stale + leftover == 0 ? 0 : 1
    }
    do {
        let (database, tasks, task) = try attachSoakOpen(dataDirectory: dataDirectory, app: app)
        defer { try? database.close() }
        try database.queue.integrityCheck()
        let files = tasks.attachments()
        defer { try? files.store.close() }
        let visible = try files.list(of: task)
        present = visible.count
        var seen = Set<String>()
        for attachment in visible {
            seen.insert(attachment.hexID)
            guard attempted.contains(attachment.name), let (seed, size) = SoakBytes.parse(attachment.name) else {
                uncommitted += 1
                FileHandle.standardError.write(Data("check-attach: '\(attachment.name)' was never attempted\n".utf8))
                continue
            }
            if detached.contains(attachment.hexID) {
                stale += 1
                FileHandle.standardError.write(Data("check-attach: '\(attachment.name)' was detached but is there\n".utf8))
            }
            var generator = SoakBytes(seed: seed)
            var same = attachment.size == Int64(size)
            let expected = UnsafeMutableRawBufferPointer.allocate(byteCount: attachment.chunkSize, alignment: 16)
            defer { expected.deallocate() }
            do {
                try files.read(id: attachment.id) { bytes in
                    let slice = UnsafeMutableRawBufferPointer(rebasing: expected[0..<bytes.count])
                    generator.fill(slice)
                    if same, memcmp(slice.baseAddress!, bytes.baseAddress!, bytes.count) != 0 { same = false }
                }
            } catch {
                same = false
                FileHandle.standardError.write(Data("check-attach: '\(attachment.name)': \(error)\n".utf8))
            }
            if !same { damaged += 1 }
        }
        for (name, hex) in committed where !seen.contains(hex) && !detaching.contains(hex) {
            lost += 1
            FileHandle.standardError.write(Data("check-attach: committed '\(name)' (\(hex)) is missing\n".utf8))
        }
        let verification = try files.store.verify()
        if !verification.problems.isEmpty {
            damaged += verification.problems.count
            FileHandle.standardError.write(Data("check-attach: verify: \(verification.problems)\n".utf8))
        }
        leftover = try files.store.collectGarbage()
        return report(opened: true)
    } catch {
        FileHandle.standardError.write(Data("check-attach: \(error)\n".utf8))
        return report(opened: false)
    }
}

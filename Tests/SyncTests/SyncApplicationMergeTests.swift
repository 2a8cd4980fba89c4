import EncryptedDatabase
import Foundation
import SecureStore
import Tasks
import Testing
import TestSupport
@testable import Sync

/// An application's own merge for a table (`setMerge(forTable:_:)`): tags edited at once on three devices end as
/// their union everywhere, in every arrival order, with nothing in the conflict log for them; a column the merge
/// leaves alone keeps the usual rule (the later edit wins, the earlier one is logged).
@Suite(.serialized) struct SyncApplicationMergeTests {
    static let note = Data(repeating: 7, count: 16)

    /// Tags merged as a sorted union of comma-separated words; every other column: the default rule.
    static func unionOfTags(_ engine: SyncEngine) {
        engine.setMerge(forTable: "notes") { edit in
            guard edit.column == "tags", case .text(let earlier) = edit.earlier, case .text(let later) = edit.later else { return nil }
            return .text(Set(earlier.split(separator: ",")).union(later.split(separator: ",")).sorted().joined(separator: ","))
        }
    }

    static func makeNotes(_ device: SyncDevice_) throws {
        try device.database.write { db in
            try db.execute("CREATE TABLE notes (id BLOB PRIMARY KEY, body TEXT NOT NULL, tags TEXT NOT NULL) WITHOUT ROWID")
        }
    }

    static func note(_ device: SyncDevice_) throws -> String? {
        try device.database.read { db in try db.scalar("SELECT body || ' [' || tags || ']' FROM notes", as: String.self) }
    }

    static func setNote(_ device: SyncDevice_, body: String? = nil, tags: String) throws {
        try device.database.write { db in
            try db.execute("UPDATE notes SET tags = ? WHERE id = ?", [tags, note])
            if let body { try db.execute("UPDATE notes SET body = ? WHERE id = ?", [body, note]) }
        }
    }

    @Test func concurrentTagsEndAsTheirUnionOnEveryDeviceInEveryOrder() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path + "/remote")
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_()
        for device in [a, b, c] { try Self.makeNotes(device) }
        try a.database.write { db in try db.execute("INSERT INTO notes VALUES (?, 'first', 'x')", [Self.note]) }
        let (engine, code) = try SyncEngine.initialize(database: a.database, remote: remote, tables: ["tasks", "notes"])
        a.engine = engine
        try a.sync()
        for device in [b, c] {
            device.engine = try SyncEngine.join(database: device.database, remote: remote, tables: ["tasks", "notes"], pairingCode: code)
        }
        for device in [a, b, c] { Self.unionOfTags(device.engine) }
        for device in [b, c] { try device.sync() }
        #expect(try Self.note(c) == "first [x]")

        // At once (nobody syncs in between): three tag edits, two body edits (B's later).
        try Self.setNote(a, body: "body from A", tags: "x,a")
        try Self.setNote(c, tags: "c,x")
        Thread.sleep(forTimeInterval: 0.01)
        try Self.setNote(b, body: "body from B", tags: "x,b")
        for _ in 0..<3 { for device in [a, b, c] { try device.sync() } }
        for device in [a, b, c] {
            #expect(try Self.note(device) == "body from B [a,b,c,x]")
            let log = try device.engine.conflicts()
            #expect(!log.contains { $0.column == "tags" }, "a merged value is not a conflict")
        }
        // The body kept the default rule: A's earlier body is in the log of the devices that held it.
        #expect(try a.engine.conflicts().contains { $0.column == "body" && $0.lostValue == .text("body from A") })

        // Fresh devices given the three devices' bundles in every order end with the same note.
        var seen: Set<String> = []
        for order in permutations([a, b, c]) {
            let fresh = try SyncDevice_()
            try Self.makeNotes(fresh)
            let partial = try TemporaryDirectory()
            for file in ["securestore-sync", "key-check"] {
                try FileManager.default.copyItem(atPath: folder.path + "/remote/" + file, toPath: partial.path + "/" + file)
            }
            fresh.engine = try SyncEngine.join(
                database: fresh.database, remote: .folder(partial.path), tables: ["tasks", "notes"], pairingCode: code)
            Self.unionOfTags(fresh.engine)
            for device in order {
                try copyTree(folder.path + "/remote/devices/" + device.engine.device, to: partial.path + "/devices/" + device.engine.device)
                // Its statement on the roster travels with its bundles (a device not on the roster is not believed).
                try copyTree(folder.path + "/remote/roster/" + device.engine.device, to: partial.path + "/roster/" + device.engine.device)
                try fresh.sync()
            }
            seen.insert(try Self.note(fresh) ?? "")
        }
        #expect(seen == ["body from B [a,b,c,x]"], "\(seen)")
    }

    /// Without a merge (or after removing it) the same edits give the later value and log the others.
    @Test func withoutAMergeTheLaterEditWinsAndTheOtherIsLogged() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        for device in [a, b] { try Self.makeNotes(device) }
        try a.database.write { db in try db.execute("INSERT INTO notes VALUES (?, 'first', 'x')", [Self.note]) }
        let (engine, code) = try SyncEngine.initialize(database: a.database, remote: remote, tables: ["tasks", "notes"])
        a.engine = engine
        try a.sync()
        b.engine = try SyncEngine.join(database: b.database, remote: remote, tables: ["tasks", "notes"], pairingCode: code)
        Self.unionOfTags(a.engine)
        a.engine.setMerge(forTable: "NOTES", nil)
        try b.sync()
        try Self.setNote(a, tags: "x,a")
        Thread.sleep(forTimeInterval: 0.01)
        try Self.setNote(b, tags: "x,b")
        for device in [a, b, a] { try device.sync() }
        for device in [a, b] { #expect(try Self.note(device) == "first [x,b]") }
        #expect(try a.engine.conflicts().map(\.lostValue) == [.text("x,a")])
    }
}

/// Merged changes reach an observation of the database like local ones (they are written through its ordinary
/// write transactions): no table list, and an hourly poll, so the value comes from the commit hooks.
@Suite(.serialized) struct SyncObservationTests {
    @Test func anObservationSeesTasksMergedFromAnotherDevice() async throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        _ = try a.tasks.create(title: "one")
        let code = try a.initialize(remote)
        try b.join(remote, code)
        // Without duplicates: a sync makes several commits close together (the merge, then the bookkeeping of what
        // was sent), and an observation may deliver an equal result again (documented); the rows are what matters.
        let titles = b.database.observe(interval: .seconds(3600)) { db in
            try db.fetch("SELECT title FROM tasks ORDER BY title") { try $0.string(at: 0) }
        }.removeDuplicates()
        var iterator = titles.makeAsyncIterator()
        #expect(try await iterator.next() == [])
        try b.sync()
        #expect(try await iterator.next() == ["one"], "the first bundle, merged")
        _ = try a.tasks.create(title: "two")
        try a.sync()
        try b.sync()
        #expect(try await iterator.next() == ["one", "two"])
    }
}

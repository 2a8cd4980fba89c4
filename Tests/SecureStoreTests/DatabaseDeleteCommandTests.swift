// `securestore db delete`, the built tool: off a terminal it needs --yes (nothing changed without it), it removes the
// database and its attachments and keeps the key as a retired key (or deletes it with --delete-keys), a missing
// database is exit 66 with nothing created, and a database open elsewhere is exit 75 with nothing changed.
import Foundation
import SecureStore
import TestSupport
import Testing

@Suite(.serialized) struct DatabaseDeleteCommandTests {
    init() throws { try Harness.require() }

    private func tool(_ fixture: KDFixture, _ arguments: [String]) throws -> ProcessResult {
        try run([product("securestore"), "--app", fixture.app, "--data-dir", fixture.directory.path] + arguments)
    }

    private func snapshot(_ fixture: KDFixture) -> [String: Data] {
        var files: [String: Data] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: fixture.directory.path)) ?? [] {
            files[name] = kdBytes(fixture.directory.path + "/" + name) ?? Data()
        }
        return files
    }

    @Test func offATerminalItNeedsYesThenDeletesAndKeepsTheKeyRetired() throws {
        let fixture = try KDFixture()
        #expect(try tool(fixture, ["tasks", "add", "pay rent"]).status == 0)
        #expect(try tool(fixture, ["tasks", "add", "--name", "other", "keep me"]).status == 0)
        let before = snapshot(fixture)
        let accounts = try fixture.accounts()
        let current = try #require(try fixture.currentAccount())

        let refused = try tool(fixture, ["db", "delete"])
        #expect(refused.status == 64)
        #expect(refused.stderr.contains("'securestore db delete' deletes a database for good: off a terminal it asks no question and needs --yes; nothing was changed"), "\(refused.stderr)")
        #expect(snapshot(fixture) == before)
        #expect(try fixture.accounts() == accounts)

        let deleted = try tool(fixture, ["db", "delete", "--yes"])
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(deleted.stdout.hasPrefix("deleted: \(fixture.path) (database id \(current.prefix(8)))\nremoved file: \(fixture.path)\n"), "\(deleted.stdout)")
        #expect(deleted.stdout.contains("deleted key item: \(current)\n"))
        let after = snapshot(fixture)
        #expect(after.keys.sorted() == [".other.db.lock", ".tasks.db.lock", "other.db"])
        #expect(after["other.db"] == before["other.db"])
        let retired = try fixture.retiredAccounts()
        #expect(retired.count == 1 && retired[0].hasPrefix(current.prefix(32) + ".retired."))
        #expect(deleted.stdout.hasSuffix("kept as a retired key (backups still open): \(retired[0])\n"))

        let again = try tool(fixture, ["db", "delete", "--yes"])
        #expect(again.status == 66)
        #expect(again.stderr.hasPrefix("securestore: there is no database 'tasks' at '\(fixture.path)'"), "\(again.stderr)")
        #expect(snapshot(fixture).keys.sorted() == [".other.db.lock", ".tasks.db.lock", "other.db"])
    }

    @Test func deleteKeysLeavesNoKeyOfTheDatabase() throws {
        let fixture = try KDFixture()
        #expect(try tool(fixture, ["tasks", "add", "pay rent"]).status == 0)
        #expect(try tool(fixture, ["db", "rotate-key"]).status == 0)
        #expect(try fixture.accounts().count == 2)
        let deleted = try tool(fixture, ["--json", "db", "delete", "--delete-keys", "--yes"])
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(deleted.stdout.contains("\"retiredAccounts\":[]"), "\(deleted.stdout)")
        #expect(try fixture.accounts().isEmpty)
        #expect(try fixture.files().isEmpty)
    }

    @Test func aDatabaseOpenElsewhereIsNotDeleted() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database, rows: 3)
        let before = snapshot(fixture)
        let accounts = try fixture.accounts()
        let refused = try tool(fixture, ["db", "delete", "--yes"])
        #expect(refused.status == 75, "\(refused.stderr)")
        #expect(refused.stderr.contains("is open in another process (or another handle)"))
        #expect(try fixture.accounts() == accounts)
        #expect(snapshot(fixture).keys.sorted() == before.keys.sorted())
        try kdExpectRows(database.queue, rows: 3)
        try database.close()
    }
}

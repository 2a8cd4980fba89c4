import Foundation
import Glibc
import TestSupport
import Testing

/// A data and configuration directory on a read-only file system (a read-only bind mount, made as root): every
/// reader works; every writer fails with 77 and changes nothing; a -wal with committed frames, which a
/// read-only open would have to ignore, is refused rather than showing an older state.
@Suite(.serialized) struct ReadOnlyFileSystemTests {
    init() throws { try Harness.require() }

    private func bindReadOnly(_ directory: String) -> Bool {
        run2("/bin/mount", ["--bind", directory, directory]) && run2("/bin/mount", ["-o", "remount,ro,bind", directory])
    }

    private func run2(_ program: String, _ arguments: [String]) -> Bool {
        (try? run([program] + arguments).status) == 0
    }

    @Test(.enabled(if: Prerequisites.isRoot, "a read-only bind mount needs root"))
    func readersWorkAndWritersFailWith77() throws {
        let app = uniqueApp()
        let root = try #require(Harness.root)
        #expect(try securestore(["tasks", "add", "still readable"], app: app).status == 0)
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        let data = root + "/data/" + app, config = root + "/config/" + app
        let before = try FileManager.default.contentsOfDirectory(atPath: data).sorted()
        let bytes = FileManager.default.contents(atPath: data + "/tasks.db")
        defer {
            _ = run2("/bin/umount", [data])
            _ = run2("/bin/umount", [config])
        }
        try #require(bindReadOnly(data) && bindReadOnly(config), "this system refuses a read-only bind mount")
        let list = try securestore(["tasks", "list"], app: app)
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains("still readable"))
        #expect(try securestore(["tasks", "count"], app: app).stdout == "1\n")
        #expect(try securestore(["db", "verify"], app: app).status == 0)
        #expect(try securestore(["db", "info"], app: app).status == 0)
        #expect(try securestore(["prefs", "get", "theme"], app: app).stdout == "dark\n")

        for command in [["tasks", "add", "x"], ["db", "rotate-key"], ["prefs", "set", "theme", "light"]] {
            let result = try securestore(command, app: app)
            #expect(result.status == 77, "\(command): \(result.stderr)")
            #expect(result.stderr.hasPrefix("securestore: "))
            #expect(result.stderr.split(separator: "\n").count == 1)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: data).sorted() == before, "no file appeared")
        #expect(FileManager.default.contents(atPath: data + "/tasks.db") == bytes)
    }
}

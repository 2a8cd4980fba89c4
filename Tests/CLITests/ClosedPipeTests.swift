import Foundation
import TestSupport
import Testing

/// Every printing command into a pipe whose reader has gone (issue 22): `securestore … | head -c 1` and a reader
/// that is gone before the first write. The process ends quietly, as coreutils and git do under SIGPIPE: no
/// "Fatal error", no stack trace, no message; status 0 (everything fit in the pipe) or 141 (SIGPIPE); and nothing
/// it read was changed. The built tool, a throw-away keyring, real files.
@Suite(.serialized) struct ClosedPipeTests {
    private let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    @Test func everyPrintingCommandEndsQuietlyWhenItsReaderIsGone() throws {
        let app = uniqueApp()
        let data = work.path + "/data"
        // 20 000 tasks: every listing is larger than a pipe's 64 KiB buffer.
        var lines = ""
        for i in 0..<20_000 {
            lines += "{\"createdAt\":\"2026-01-01T00:00:00.000000Z\",\"done\":\(i % 3 == 0),"
                + "\"id\":\"00000000-0000-4000-8000-\(String(format: "%012d", i))\",\"title\":\"task \(i)\"}\n"
        }
        let tasks = work.path + "/tasks.jsonl"
        try lines.write(toFile: tasks, atomically: true, encoding: .utf8)
        let imported = try securestore(["--data-dir", data, "tasks", "import", tasks], app: app)
        try #require(imported.status == 0, "\(imported.stderr)")
        let file = work.path + "/scan.bin"
        #expect(try run(["sh", "-c", "head -c 3000000 /dev/urandom > '\(file)'"]).status == 0)
        let attached = try securestore(
            ["--data-dir", data, "tasks", "attach", "00000000-0000-4000-8000-000000000007", file], app: app)
        try #require(attached.status == 0, "\(attached.stderr)")
        let attachment = String(attached.stdout.prefix(8))
        #expect(try securestore(["token", "set", "pipe-token"], app: app, input: "s3cret-value").status == 0)
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        let exportedBefore = try securestore(["--data-dir", data, "tasks", "export"], app: app).stdout

        let commands: [[String]] = [
            ["--data-dir", data, "tasks", "list", "--limit", "20000"],
            ["--data-dir", data, "--json", "tasks", "list", "--limit", "20000"],
            ["--data-dir", data, "tasks", "export"],
            ["--data-dir", data, "tasks", "attachment", "get", attachment],
            ["--data-dir", data, "tasks", "attachments", "00000000-0000-4000-8000-000000000007"],
            ["--data-dir", data, "db", "info"],
            ["--data-dir", data, "db", "keys", "list"],
            ["token", "get", "pipe-token"],
            ["token", "list"],
            ["prefs", "list"],
            ["man"],
            ["completion", "bash"],
            ["--help"],
            ["tasks", "--help"],
        ]
        for command in commands {
            for reader in ["head -c 1 >/dev/null", "exit 0"] {
                // The reader `exit 0` is gone before the tool's first write (it starts first and does nothing).
                let got = try run(
                    ["bash", "-c", "\"$0\" \"$@\" | { \(reader); }; echo \"status=${PIPESTATUS[0]}\" >&2",
                     product("securestore"), "--app", app] + command)
                let context = "\(command.joined(separator: " ")) | \(reader)"
                #expect(!got.stderr.contains("Fatal error"), "\(context): \(got.stderr)")
                #expect(!got.stderr.contains("Broken pipe"), "\(context): \(got.stderr)")
                #expect(!got.stderr.contains("securestore:"), "\(context): \(got.stderr)")
                let status = got.stderr.split(separator: "\n").last.map(String.init) ?? ""
                #expect(status == "status=0" || status == "status=141", "\(context): \(got.stderr)")
            }
        }
        // The big ones cannot fit in the pipe: they did meet the closed pipe.
        let listing = try run(
            ["bash", "-c", "\"$0\" \"$@\" | head -c 1 >/dev/null; echo ${PIPESTATUS[0]}", product("securestore"),
             "--app", app, "--data-dir", data, "tasks", "export"])
        #expect(listing.stdout == "141\n")

        // Nothing was changed: the same tasks, the token, the preference, the attachment.
        #expect(try securestore(["--data-dir", data, "tasks", "export"], app: app).stdout == exportedBefore)
        #expect(try securestore(["token", "get", "pipe-token"], app: app).stdout == "s3cret-value")
        #expect(try securestore(["prefs", "get", "theme"], app: app).stdout == "dark\n")
        let copy = work.path + "/copy.bin"
        #expect(try securestore(["--data-dir", data, "tasks", "attachment", "get", attachment, "--output", copy], app: app).status == 0)
        #expect(FileManager.default.contents(atPath: copy) == FileManager.default.contents(atPath: file))
    }
}

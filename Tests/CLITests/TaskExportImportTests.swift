import Foundation
import TestSupport
import Testing

/// `securestore tasks export` and `tasks import` on real encrypted files with the key in the real keyring.
@Suite(.serialized) struct TaskExportImportTests {
    init() throws { try Harness.require() }

    /// Titles that need quoting or escaping somewhere: commas, quotes, a tab, a backslash, non-ASCII.
    static let titles = ["plain", "comma, here", "say \"hi\"", "tab\there", "back\\slash", "naïve ✓ 日本", "\"quoted, both\""]

    /// An app with `titles` as tasks, the second one done.
    private func seeded(_ function: String = #function) throws -> String {
        let app = uniqueApp(function)
        for title in Self.titles { #expect(try securestore(["tasks", "add", title], app: app).status == 0) }
        let first = try #require(try export(app).split(separator: "\n").dropFirst().first)
        let id = try #require(try object(String(first))["id"] as? String)
        #expect(try securestore(["tasks", "done", id], app: app).status == 0)
        return app
    }

    private func export(_ app: String, _ format: String = "jsonl") throws -> String {
        let result = try securestore(["tasks", "export", "--format", format], app: app)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout
    }

    private func object(_ line: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    private func titles(_ app: String) throws -> [String] {
        try export(app).split(separator: "\n").map { try object(String($0))["title"] as? String ?? "" }
    }

    @Test func anExportInEachFormatImportsIntoAnotherAppEqualToTheOriginal() throws {
        let original = try seeded()
        let reference = try export(original)
        #expect(reference.split(separator: "\n").count == Self.titles.count)
        #expect(reference.contains("\"done\":true"))
        for format in ["jsonl", "csv", "json"] {
            let copy = uniqueApp()
            let imported = try securestore(["tasks", "import", "--format", format], app: copy, input: try export(original, format))
            #expect(imported.status == 0, "\(format): \(imported.stderr)")
            #expect(imported.stdout == "imported \(Self.titles.count) task(s)\n")
            // Same IDs, titles, done flags and dates to the microsecond, in the same order.
            #expect(try export(copy) == reference, "\(format)")
        }
    }

    @Test func csvQuotesCommasQuotesAndLineBreaksAsRFC4180() throws {
        let app = try seeded()
        let csv = try export(app, "csv")
        let lines = csv.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first == "id,title,done,createdAt")
        #expect(lines.contains { $0.contains(",\"comma, here\",") })
        #expect(lines.contains { $0.contains(",\"say \"\"hi\"\"\",") })
        #expect(lines.contains { $0.contains(",\"\"\"quoted, both\"\"\",") })
        #expect(lines.contains { $0.contains(",plain,false,") })

        // A quoted field may hold a line break: it is one field of one record, and a title must be one line.
        let copy = uniqueApp()
        #expect(try securestore(["tasks", "add", "already here"], app: copy).status == 0)
        let before = try export(copy)
        let input = "title\nfirst\n\"two\nlines\"\nlast\n"
        let bad = try securestore(["tasks", "import", "--format", "csv"], app: copy, input: input)
        #expect(bad.status == 65)
        #expect(bad.stderr == "securestore: line 3: a task title must be one line: it contains a line break; nothing was imported\n")
        #expect(try export(copy) == before, "nothing imported")
        // Commas and doubled quotes inside quotes, and CRLF line ends, import as written.
        let good = try securestore(
            ["tasks", "import", "--format", "csv"], app: copy, input: "title\r\n\"a, b\"\r\n\"say \"\"hi\"\"\"\r\n")
        #expect(good.status == 0, "\(good.stderr)")
        #expect(try titles(copy) == ["already here", "a, b", "say \"hi\""])
    }

    @Test func recordsWithOnlyATitleGetANewIDAndNowInTheirOrder() throws {
        let start = Date()
        let app = uniqueApp()
        #expect(try securestore(["tasks", "import", "--format", "lines"], app: app, input: "one\n\n  two  \nthree").stdout
            == "imported 3 task(s)\n")
        #expect(try securestore(["tasks", "import"], app: app, input: "\"four\"\n{\"title\": \"five\"}\n").status == 0)
        #expect(try securestore(["tasks", "import", "--format", "csv"], app: app, input: "six\n\"seven, eight\"\n").status == 0)
        #expect(try securestore(["tasks", "import", "--format", "json"], app: app, input: "[\"nine\", {\"title\": \"ten\"}]").status == 0)
        #expect(try titles(app) == ["one", "two", "three", "four", "five", "six", "seven, eight", "nine", "ten"])
        let objects = try export(app).split(separator: "\n").map { try object(String($0)) }
        #expect(Set(objects.compactMap { $0["id"] as? String }).count == 9)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for object in objects {
            let date = try #require(formatter.date(from: object["createdAt"] as? String ?? ""))
            #expect(date >= start.addingTimeInterval(-1) && date <= Date().addingTimeInterval(1))
            #expect(object["done"] as? Bool == false)
        }
    }

    @Test func duplicatesFailByDefaultOrAreSkippedOrReplacedAsAsked() throws {
        let original = try seeded()
        let lines = try export(original).split(separator: "\n").map(String.init)
        let copy = uniqueApp()
        #expect(try securestore(["tasks", "import"], app: copy, input: lines[0] + "\n").status == 0)
        let firstID = try #require(try object(lines[0])["id"] as? String)
        let before = try export(copy)

        // fail (the default): the first duplicate named with its line, nothing written.
        let all = lines.joined(separator: "\n") + "\n"
        let failed = try securestore(["tasks", "import"], app: copy, input: all)
        #expect(failed.status == 65)
        #expect(failed.stderr == "securestore: line 1: a task with the ID \(firstID) already exists; nothing was imported\n")
        #expect(try export(copy) == before)
        let explicit = try securestore(["tasks", "import", "--on-duplicate", "fail"], app: copy, input: all)
        #expect(explicit.status == 65 && explicit.stderr == failed.stderr)

        // skip: the task there stays as it is.
        let renamed = lines[0].replacingOccurrences(of: "\"title\":\"plain\"", with: "\"title\":\"changed\"")
        let skipped = try securestore(["tasks", "import", "--on-duplicate", "skip"], app: copy, input: renamed + "\n" + all)
        #expect(skipped.status == 0, "\(skipped.stderr)")
        #expect(skipped.stdout == "imported \(lines.count - 1) task(s), skipped 2 duplicate(s)\n")
        let originalExport = try export(original)
        #expect(try export(copy) == originalExport)

        // replace: the imported one wins.
        let replaced = try securestore(["tasks", "import", "--on-duplicate", "replace"], app: copy, input: renamed + "\n")
        #expect(replaced.stdout == "imported 0 task(s), replaced 1\n")
        #expect(try titles(copy).first == "changed")
        #expect(try securestore(["tasks", "count"], app: copy).stdout == "\(lines.count)\n")

        let bad = try securestore(["tasks", "import", "--on-duplicate", "merge"], app: copy, input: all)
        #expect(bad.status == 64)
        #expect(bad.stderr.hasPrefix("securestore: --on-duplicate takes one of skip, replace, fail, not 'merge'\n"))
    }

    @Test func aBadLineInTheMiddleIsNamedAndNothingIsImportedUnlessBatched() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "already here"], app: app).status == 0)
        let before = try export(app)
        let input = "{\"title\": \"a\"}\n{\"title\": \"b\"}\n{\"title\": \"c\", \"done\": \"yes\"}\n{\"title\": \"d\"}\n"
        let failed = try securestore(["tasks", "import"], app: app, input: input)
        #expect(failed.status == 65)
        #expect(failed.stderr == "securestore: line 3: \"done\" must be true or false; nothing was imported\n")
        #expect(try export(app) == before)

        let notJSON = try securestore(["tasks", "import"], app: app, input: "{\"title\": \"a\"}\n{oops\n")
        #expect(notJSON.stderr == "securestore: line 2: not valid JSON; nothing was imported\n")
        #expect(try export(app) == before)

        // With batches of 1, the tasks before the bad line stay, and the message says so.
        let batched = try securestore(["tasks", "import", "--batch", "1"], app: app, input: input)
        #expect(batched.status == 65)
        #expect(batched.stderr
            == "securestore: line 3: \"done\" must be true or false; the 2 task(s) of the batches before it were imported (2 added)\n")
        #expect(try titles(app) == ["already here", "a", "b"])
    }

    @Test func exportToAFileReplacesAnExistingFileAtomicallyWithMode0600() throws {
        let app = try seeded()
        let directory = try #require(Harness.root) + "/export-\(app)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/tasks.jsonl"
        try Data("old contents\n".utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)

        let result = try securestore(["tasks", "export", "--output", path], app: app)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "")
        #expect(result.stderr == "exported \(Self.titles.count) task(s) to '\(path)'\n")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == (try export(app)))
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["tasks.jsonl"], "no temporary left")

        // An export that fails leaves the file as it was.
        let missing = try securestore(["tasks", "export", "--output", path], app: uniqueApp())
        #expect(missing.status == 66)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == (try export(app)))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["tasks.jsonl"])
    }

    @Test func listJSONWithTotalsCarriesWhatTheTextOutputShows() throws {
        let app = try seeded()
        let text = try securestore(["tasks", "list", "--limit", "2", "--offset", "1"], app: app)
        #expect(text.stderr == "(2–3 of \(Self.titles.count))\n")
        let json = try securestore(["--json", "tasks", "list", "--limit", "2", "--offset", "1", "--totals"], app: app)
        let page = try object(json.stdout)
        #expect((page["tasks"] as? [[String: Any]])?.count == 2)
        #expect(page["matching"] as? Int == Self.titles.count && page["total"] as? Int == Self.titles.count)
        #expect(page["done"] as? Int == 1 && page["open"] as? Int == Self.titles.count - 1)
        #expect(page["offset"] as? Int == 1 && page["limit"] as? Int == 2)
        // Without --totals the list is still a bare array.
        let plain = try securestore(["--json", "tasks", "list"], app: app)
        #expect((try JSONSerialization.jsonObject(with: Data(plain.stdout.utf8)) as? [Any])?.count == Self.titles.count)
    }
}

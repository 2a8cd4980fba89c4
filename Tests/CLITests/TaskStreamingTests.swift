import Foundation
import TestSupport
import Testing

/// `tasks list` streams (issue 22, item 3): `--limit none` lists every task, `--json` writes the records of
/// `tasks export --format json`, `--totals` wraps them with the counts of the same snapshot. The built tool, a
/// throw-away keyring, real files. (Its speed and memory at 1M tasks are benchmarks: `make bench`, list-json.)
@Suite(.serialized) struct TaskListStreamingTests {
    init() throws { try Harness.require() }

    /// An app with `count` tasks, one millisecond apart, every third done, imported as JSON Lines.
    private func seeded(_ count: Int, _ function: String = #function) throws -> String {
        let app = uniqueApp(function)
        var lines = ""
        for i in 0..<count {
            let second = String(format: "%02d", i / 1000 % 60)
            let milli = String(format: "%03d", i % 1000)
            lines += "{\"createdAt\":\"2026-03-01T10:00:\(second).\(milli)000Z\",\"done\":\(i % 3 == 0),"
                + "\"id\":\"00000000-0000-4000-8000-\(String(format: "%012d", i))\",\"title\":\"task \(i)\"}\n"
        }
        let imported = try securestore(["tasks", "import"], app: app, input: lines)
        try #require(imported.status == 0, "\(imported.stderr)")
        return app
    }

    @Test func limitNoneListsEveryTaskAndAllStaysTheStatusFilter() throws {
        let app = try seeded(120)
        let all = try securestore(["tasks", "list", "--limit", "none"], app: app)
        #expect(all.status == 0, "\(all.stderr)")
        let lines = all.stdout.split(separator: "\n")
        #expect(lines.count == 120)
        #expect(lines.first?.hasSuffix("  [ ]  task 119") == true)
        #expect(lines.last == "00000000  [x]  task 0")
        // Everything was shown, into a pipe: nothing to say on stderr.
        #expect(all.stderr == "")

        // --all filters by status (done and open), it lifts no limit: still a page of 50.
        let page = try securestore(["tasks", "list", "--all"], app: app)
        #expect(page.stdout.split(separator: "\n").count == 50)
        #expect(page.stderr == "(1–50 of 120)\n")
        let done = try securestore(["tasks", "list", "--done", "--limit", "none", "--offset", "30"], app: app)
        #expect(done.stdout.split(separator: "\n").count == 10)
        #expect(done.stderr == "(31–40 of 40)\n")
        let past = try securestore(["tasks", "list", "--limit", "none", "--offset", "500"], app: app)
        #expect(past.stdout == "" && past.stderr == "(none of 120)\n")

        let bad = try securestore(["tasks", "list", "--limit", "all"], app: app)
        #expect(bad.status == 64)
        #expect(bad.stderr.hasPrefix("securestore: --limit takes a whole number of at least 0, or none, not 'all'\n"))
        let help = try securestore(["tasks", "list", "--help"], app: app)
        #expect(help.stdout.contains("--limit N|none"))
    }

    @Test func listJSONIsTheExportsJSONArrayAndTotalsWrapIt() throws {
        let app = try seeded(300)
        let export = try securestore(["tasks", "export", "--format", "json"], app: app)
        let list = try securestore(["--json", "tasks", "list", "--limit", "none", "--oldest-first"], app: app)
        #expect(list.status == 0, "\(list.stderr)")
        #expect(Array(list.stdout.utf8) == Array(export.stdout.utf8), "the same records, byte for byte")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        #expect(array.count == 300)
        #expect(array.first?.keys.sorted() == ["createdAt", "done", "id", "title"])
        #expect(array.first?["createdAt"] as? String == "2026-03-01T10:00:00.000000Z")

        // A page, newest first, as before; an empty one is an empty array.
        let page = try securestore(["--json", "tasks", "list", "--open", "--limit", "2"], app: app)
        let titles = try #require(try JSONSerialization.jsonObject(with: Data(page.stdout.utf8)) as? [[String: Any]])
            .map { $0["title"] as? String }
        #expect(titles == ["task 299", "task 298"])
        let empty = try securestore(["--json", "tasks", "list", "--search", "nothing like this"], app: app)
        #expect(empty.stdout == "[]\n")

        // --totals: the counts around the array, keys sorted; "limit" null without one.
        let totals = try securestore(["--json", "tasks", "list", "--limit", "none", "--done", "--totals"], app: app)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(totals.stdout.utf8)) as? [String: Any])
        #expect(object.keys.sorted() == ["done", "limit", "matching", "offset", "open", "tasks", "total"])
        #expect(object["limit"] is NSNull)
        #expect(object["matching"] as? Int == 100 && object["total"] as? Int == 300)
        #expect(object["done"] as? Int == 100 && object["open"] as? Int == 200 && object["offset"] as? Int == 0)
        #expect((object["tasks"] as? [Any])?.count == 100)
        #expect(totals.stdout.hasPrefix("{\"done\":100,\"limit\":null,\"matching\":100,\"offset\":0,\"open\":200,\"tasks\":[\n{"))
        #expect(totals.stdout.hasSuffix("}\n],\"total\":300}\n"))
        let limited = try securestore(["--json", "tasks", "list", "--limit", "3", "--offset", "1", "--totals"], app: app)
        #expect(limited.stdout.hasPrefix("{\"done\":100,\"limit\":3,\"matching\":300,\"offset\":1,\"open\":200,\"tasks\":[\n{"))
    }

    @Test func aListedTaskImportsBackWithItsDateToTheMicrosecond() throws {
        let app = try seeded(3)
        let list = try securestore(["--json", "tasks", "list"], app: app)
        // The listed array is an import format as it is; replace keeps every date exactly.
        let replaced = try securestore(["tasks", "import", "--format", "json", "--on-duplicate", "replace"], app: app, input: list.stdout)
        #expect(replaced.stdout == "imported 0 task(s), replaced 3\n")
        #expect(try securestore(["--json", "tasks", "list"], app: app).stdout == list.stdout)
    }
}

/// Whatever the task table holds — written by another program, here the reference `sqlcipher` tool — exports,
/// imports, and exports again byte for byte (issue 22, item 5; Docs/tasks.md, "What a title may hold"): random
/// titles with every kind of control character, dates at the 64-bit limits and around years 0 and 9999, both
/// statuses, in every export format.
@Suite(.serialized) struct TaskRoundTripFuzzTests {
    init() throws { try Harness.require() }

    /// SplitMix64: a seeded generator, so that a failure can be replayed from the seed it prints.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    private func databasePath(_ app: String) throws -> String {
        try #require(Harness.root) + "/data/\(app)/tasks.db"
    }

    /// Runs `sql` with the reference tool on the task database of `app`, keyed with the key the keyring holds.
    private func sqlcipher(_ app: String, _ sql: String) throws -> ProcessResult {
        let path = try databasePath(app)
        let key = try currentDatabaseKey(app, path: path)
        try #require(key.count == 64)
        return try TestSupport.sqlcipher(path, key: .raw(hex: key), pageSize: 4096, sql)
    }

    private func hex(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// A random title: scalars from every class an export must carry (C0 and C1 controls, DEL, NUL, line
    /// breaks, bidi and zero-width format characters, quotes, commas, backslashes, spaces at the ends, CJK,
    /// emoji), sometimes empty, sometimes longer than `tasks add` allows.
    private func title(_ random: inout Generator) -> String {
        let pools: [[UInt32]] = [
            Array(0x00...0x1F) + [0x7F], Array(0x80...0x9F), [0x0A, 0x0D, 0x0D, 0x0A, 0x2028, 0x2029, 0x85],
            [0x202E, 0x202D, 0x2066, 0x200B, 0x200D, 0xFEFF], [0x22, 0x2C, 0x5C, 0x27, 0x2F, 0x20, 0x09, 0x1B],
            Array(0x41...0x5A) + Array(0x61...0x7A), [0xE9, 0x65, 0x301, 0x4E2D, 0x6587, 0x1F600, 0x1F469, 0xFFFD, 0xD7FF, 0xE000, 0x10FFFF],
        ]
        let length = Int.random(in: 0...10, using: &random) == 0 ? Int.random(in: 900...1_200, using: &random) : Int.random(in: 0...24, using: &random)
        var text = String.UnicodeScalarView()
        for _ in 0..<length {
            let pool = pools[Int.random(in: 0..<pools.count, using: &random)]
            text.append(Unicode.Scalar(pool[Int.random(in: 0..<pool.count, using: &random)])!)
        }
        return String(text)
    }

    /// Dates at the edges of what the column can hold and of the formats' year ranges, and random ones.
    private func date(_ random: inout Generator, _ index: Int) -> Int64 {
        let edges: [Int64] = [
            .min, .max, .min + 1, .max - 1, 0, -1, 1, -62_167_219_200_000_000, -62_167_219_200_000_001,
            253_402_300_799_999_999, 253_402_300_800_000_000, 951_782_400_000_000, -86_400_000_001,
        ]
        if index < edges.count { return edges[index] }
        return Int.random(in: 0...2, using: &random) == 0 ? Int64.random(in: .min ... .max, using: &random)
            : Int64.random(in: -5_000_000_000_000_000...5_000_000_000_000_000, using: &random)
    }

    private func export(_ app: String, _ format: String) throws -> String {
        let result = try securestore(["tasks", "export", "--format", format], app: app)
        #expect(result.status == 0, "export \(format): \(result.stderr)")
        return result.stdout
    }

    @Test func whateverTheTableHoldsExportsImportsAndExportsAgainByteForByte() throws {
        let seed = UInt64.random(in: 0 ... .max)
        var random = Generator(state: seed)
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "made by the tool"], app: app).status == 0)
        var sql = "BEGIN;\n"
        for index in 0..<240 {
            var id = [UInt8](repeating: 0, count: 16)
            for i in 0..<16 { id[i] = UInt8.random(in: 0...255, using: &random) }
            let title = title(&random)
            sql += "INSERT INTO tasks (created_at, id, title, done) VALUES (\(date(&random, index)), x'\(hex(id))', "
                + "CAST(x'\(hex(title.utf8))' AS TEXT), \(index % 2));\n"
        }
        // The case of the issue, and what another program may store that is not UTF-8 text: invalid bytes, a blob.
        sql += "INSERT INTO tasks (created_at, id, title, done) VALUES (1, x'\(String(repeating: "e1", count: 16))', "
            + "'red ' || char(27) || '[31m alert', 0);\n"
        sql += "INSERT INTO tasks (created_at, id, title, done) VALUES (2, x'\(String(repeating: "e2", count: 16))', "
            + "CAST(x'636166e900ff41' AS TEXT), 1);\n"
        sql += "INSERT INTO tasks (created_at, id, title, done) VALUES (3, x'\(String(repeating: "e3", count: 16))', x'00ff', 0);\n"
        sql += "COMMIT;\n"
        let wrote = try sqlcipher(app, sql)
        try #require(wrote.status == 0 && wrote.stderr.isEmpty, "seed \(seed): \(wrote.stderr)")
        #expect(try securestore(["tasks", "count"], app: app).stdout == "244\n")

        let reference = try export(app, "jsonl")
        #expect(reference.contains("\"title\":\"red \\u001b[31m alert\""), "seed \(seed)")
        // Bytes that are not UTF-8 are read as every UTF-8 reader repairs them: U+FFFD.
        #expect(reference.contains("\"title\":\"caf\u{FFFD}\\u0000\u{FFFD}A\""), "seed \(seed)")
        #expect(reference.contains("\"title\":\"\\u0000\u{FFFD}\""), "seed \(seed)")
        for format in ["jsonl", "csv", "json"] {
            let first = try export(app, format)
            let copy = uniqueApp()
            let imported = try securestore(["tasks", "import", "--format", format], app: copy, input: first)
            #expect(imported.status == 0, "seed \(seed), \(format): \(imported.stderr)")
            #expect(imported.stdout == "imported 244 task(s)\n", "seed \(seed), \(format)")
            #expect(Array(try export(copy, format).utf8) == Array(first.utf8), "seed \(seed), \(format): export → import → export")
            #expect(Array(try export(copy, "jsonl").utf8) == Array(reference.utf8), "seed \(seed), \(format) → jsonl")
            #expect(try securestore(["tasks", "count", "--done"], app: copy).stdout == "121\n", "seed \(seed), \(format)")
        }
    }

    @Test func theLimitsOfTheDateFormatAreWrittenAsExpandedYears() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "made by the tool"], app: app).status == 0)
        let wrote = try sqlcipher(
            app,
            "INSERT INTO tasks VALUES (-9223372036854775808, x'\(String(repeating: "01", count: 16))', 'first', 0);\n"
                + "INSERT INTO tasks VALUES (9223372036854775807, x'\(String(repeating: "02", count: 16))', 'last', 1);\n"
                + "INSERT INTO tasks VALUES (-62167219200000000, x'\(String(repeating: "03", count: 16))', 'year 0', 0);\n")
        try #require(wrote.status == 0, "\(wrote.stderr)")
        let lines = try export(app, "jsonl").split(separator: "\n")
        #expect(lines.first?.hasPrefix("{\"createdAt\":\"-290308-12-21T19:59:05.224192Z\",") == true)
        #expect(lines.dropFirst().first?.hasPrefix("{\"createdAt\":\"0000-01-01T00:00:00.000000Z\",") == true)
        #expect(lines.last?.hasPrefix("{\"createdAt\":\"+294247-01-10T04:00:54.775807Z\",") == true)
        // One microsecond beyond either end, or a day its month does not have, is not a date.
        for createdAt in ["+294247-01-10T04:00:54.775808Z", "-290308-12-21T19:59:05.224191Z", "2026-02-29T00:00:00Z"] {
            let bad = try securestore(
                ["tasks", "import"], app: uniqueApp(),
                input: "{\"createdAt\":\"\(createdAt)\",\"done\":false,\"id\":\"\(UUID().uuidString)\",\"title\":\"x\"}\n")
            #expect(bad.status == 65)
            #expect(bad.stderr.hasPrefix("securestore: line 1: '\(createdAt)' is not an RFC 3339 date"), "\(createdAt)")
        }
    }

    @Test func aNewTaskStillGetsTheTitleRulesOfTasksAdd() throws {
        let app = uniqueApp()
        // A record without an ID is a new task: trimmed, and refused when `tasks add` would refuse it.
        let trimmed = try securestore(["tasks", "import"], app: app, input: "{\"title\": \"  padded  \"}\n")
        #expect(trimmed.status == 0, "\(trimmed.stderr)")
        #expect(try securestore(["tasks", "list"], app: app).stdout.hasSuffix("  [ ]  padded\n"))
        let escape = try securestore(["tasks", "import"], app: app, input: "{\"title\": \"ok\"}\n{\"title\": \"red \\u001b[31m\"}\n")
        #expect(escape.status == 65)
        #expect(escape.stderr == "securestore: line 2: a task title cannot contain control characters (found U+001B); nothing was imported\n")
        // With an ID it restores a task, exactly as written.
        let id = UUID().uuidString.lowercased()
        let restored = try securestore(
            ["tasks", "import"], app: app,
            input: "{\"createdAt\":\"2026-01-01T00:00:00Z\",\"done\":false,\"id\":\"\(id)\",\"title\":\" red \\u001b[31m \"}\n")
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(try securestore(["tasks", "export"], app: app).stdout.contains("\"id\":\"\(id)\",\"title\":\" red \\u001b[31m \"}"))
        #expect(try securestore(["tasks", "list"], app: app).stdout.contains("  [ ]   red \\u{1B}[31m \n"))
    }

    @Test func aDuplicateIsNamedByItsOwnLineInAChunkReadAhead() throws {
        let app = uniqueApp()
        var lines = ""
        for i in 0..<5_000 {
            lines += "{\"createdAt\":\"2026-01-01T00:00:00.000000Z\",\"done\":false,"
                + "\"id\":\"\(String(format: "%08x", 5_000 - i))-0000-4000-8000-000000000000\",\"title\":\"task \(i)\"}\n"
        }
        // Line 4001 repeats the ID of line 10, line 4500 that of line 20: the first in the input is named.
        var records = lines.split(separator: "\n").map(String.init)
        records[4_000] = records[9].replacingOccurrences(of: "task 9", with: "again")
        records[4_499] = records[19].replacingOccurrences(of: "task 19", with: "again")
        let failed = try securestore(["tasks", "import"], app: app, input: records.joined(separator: "\n") + "\n")
        #expect(failed.status == 65)
        #expect(failed.stderr == "securestore: line 4001: a task with the ID \(String(format: "%08x", 4_991))-0000-4000-8000-000000000000 already exists; nothing was imported\n")
        // skip keeps the first of each ID, replace takes the last.
        let skipped = try securestore(["tasks", "import", "--on-duplicate", "skip"], app: app, input: records.joined(separator: "\n") + "\n")
        #expect(skipped.stdout == "imported 4998 task(s), skipped 2 duplicate(s)\n")
        #expect(try securestore(["tasks", "list", "--search", "again"], app: app).stdout == "")
        let replaced = try securestore(["tasks", "import", "--on-duplicate", "replace"], app: uniqueApp(), input: records.joined(separator: "\n") + "\n")
        #expect(replaced.stdout == "imported 4998 task(s), replaced 2\n")
    }

    @Test func aCreationDateThatIsNotAnIntegerStopsTheExportSayingWhich() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "made by the tool"], app: app).status == 0)
        let wrote = try sqlcipher(app, "INSERT INTO tasks VALUES (1.5, x'\(String(repeating: "ab", count: 16))', 'half', 0);\n")
        try #require(wrote.status == 0, "\(wrote.stderr)")
        let export = try securestore(["tasks", "export"], app: app)
        #expect(export.status == 65)
        #expect(export.stderr == "securestore: the task abababab-abab-abab-abab-abababababab has a creation date stored as the real number 1.5, "
            + "not as integer microseconds (another program wrote it); it cannot be exported so that it imports back equal\n")
        // Listing still shows it, as SQLite reads it.
        #expect(try securestore(["tasks", "list"], app: app).stdout.contains("abababab  [ ]  half"))
    }
}

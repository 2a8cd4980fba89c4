// `tasks import --from taskwarrior|todo.txt` through the built tool, on files the real tools wrote (taskwarrior's
// `task export`, todo.txt's `todo-txt`) and on files written by hand: what lands in the list, the messages, a second
// import that adds nothing, and bad input that changes nothing.
import Foundation
import TestSupport
import Testing

private func write(_ text: String, to path: String) throws {
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

/// One exported task of ours, as `tasks export` writes it.
private struct Exported: Hashable {
    let id: String
    let title: String
    let done: Bool
    let createdAt: String
}

private func exported(_ app: String) throws -> [Exported] {
    let result = try securestore(["tasks", "export"], app: app)
    #expect(result.status == 0, "\(result.stderr)")
    return try result.stdout.split(separator: "\n").map { line in
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        return Exported(
            id: object["id"] as? String ?? "", title: object["title"] as? String ?? "", done: object["done"] as? Bool ?? false,
            createdAt: object["createdAt"] as? String ?? "")
    }
}

/// taskwarrior's `20261125T173741Z` as our export writes it: `2026-11-25T17:37:41.000000Z`.
private func ourDate(_ taskwarrior: String) -> String {
    let c = Array(taskwarrior)
    return "\(String(c[0..<4]))-\(String(c[4..<6]))-\(String(c[6..<8]))T\(String(c[9..<11])):\(String(c[11..<13])):\(String(c[13..<15])).000000Z"
}

@Suite(.serialized) struct TaskImportTests {
    init() throws { try Harness.require() }

    @Test(.enabled(if: Prerequisites.installed("task"), "needs taskwarrior (Debian package taskwarrior)"))
    func taskwarriorsExportKeepsIDsAndDatesMapsStatusesAndImportsAgainAsANoOp() throws {
        let directory = try TemporaryDirectory()
        var environment = ProcessInfo.processInfo.environment
        environment["TASKDATA"] = directory.path + "/taskdata"
        environment["TASKRC"] = directory.path + "/taskrc"
        try write("", to: directory.path + "/taskrc")
        func task(_ arguments: [String]) throws -> ProcessResult {
            let result = try run(["task", "rc.confirmation=off", "rc.verbose=nothing"] + arguments, environment: environment)
            #expect(result.status == 0, "task \(arguments): \(result.stderr)")
            return result
        }
        _ = try task(["add", "Buy milk"])
        _ = try task(["add", "Pay \"rent\"", "project:home", "+bills", "due:tomorrow"])
        _ = try task(["add", "Old thing"])
        _ = try task(["add", "Water plants", "recur:weekly", "due:tomorrow"])
        _ = try task(["add", "Later", "wait:tomorrow"])
        _ = try task(["/Buy milk/", "done"])
        _ = try task(["/Old thing/", "delete"])
        let export = try task(["export"]).stdout
        let file = directory.path + "/tasks.json"
        try write(export, to: file)

        // What taskwarrior says, to compare with.
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(export.utf8)) as? [[String: Any]])
        let statuses = objects.map { $0["status"] as? String ?? "" }
        #expect(statuses.filter { $0 == "recurring" }.count == 1, "a template and its instance: \(statuses)")
        #expect(statuses.filter { $0 == "deleted" }.count == 1)
        let expected = Set(objects.compactMap { object -> Exported? in
            let status = object["status"] as? String
            guard status == "pending" || status == "waiting" || status == "completed" else { return nil }
            return Exported(
                id: object["uuid"] as? String ?? "", title: object["description"] as? String ?? "",
                done: status == "completed", createdAt: ourDate(object["entry"] as? String ?? ""))
        })
        #expect(expected.count == 4)
        #expect(expected.contains { $0.title == "Buy milk" && $0.done })
        #expect(expected.contains { $0.title == "Water plants" && !$0.done }, "the instance of the recurring task")

        let app = uniqueApp()
        let first = try securestore(["tasks", "import", "--from", "taskwarrior", file], app: app)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout == "imported 4 task(s); left out 1 deleted and 1 recurrence template(s)\n")
        #expect(first.stderr.isEmpty)
        let imported = try exported(app)
        #expect(Set(imported) == expected)

        // Again, from standard input: the same IDs, so nothing is added and nothing changes.
        let again = try securestore(["tasks", "import", "--from", "taskwarrior", "-"], app: app, input: export)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout == "imported 0 task(s), skipped 4 duplicate(s); left out 1 deleted and 1 recurrence template(s)\n")
        #expect(try exported(app) == imported)

        // A task completed in taskwarrior since: replace brings it over, by ID.
        _ = try task(["/Pay/", "done"])
        let later = directory.path + "/later.json"
        try write(try task(["export"]).stdout, to: later)
        let replaced = try securestore(
            ["--json", "tasks", "import", "--from", "taskwarrior", "--on-duplicate", "replace", later], app: app)
        #expect(replaced.status == 0, "\(replaced.stderr)")
        #expect(replaced.stdout == #"{"inserted":0,"leftOut":{"deleted":1,"recurring":1},"replaced":4,"skipped":0}"# + "\n")
        let after = try exported(app)
        #expect(after.count == 4)
        #expect(after.first { $0.title == "Pay \"rent\"" }?.done == true)
        #expect(Set(after.map(\.id)) == Set(imported.map(\.id)))
    }

    @Test func aMalformedTaskwarriorFileIsRefusedWithItsLineAndChangesNothing() throws {
        let app = uniqueApp()
        let good = """
            [
            {"id":1,"description":"Keep me","entry":"20260101T090000Z","modified":"20260101T090000Z","status":"pending","uuid":"6860c991-082a-46c1-ba21-d5c1e9aaf93a","urgency":1}
            ]
            """
        #expect(try securestore(["tasks", "import", "--from", "taskwarrior"], app: app, input: good).status == 0)
        let before = try securestore(["tasks", "export"], app: app).stdout
        #expect(before == #"{"createdAt":"2026-01-01T09:00:00.000000Z","done":false,"id":"6860c991-082a-46c1-ba21-d5c1e9aaf93a","title":"Keep me"}"# + "\n")

        let valid = #"{"description":"New","entry":"20260102T090000Z","status":"pending","uuid":"0e1fbd1b-325d-47b0-838a-be98720b51b6"}"#
        let cases: [(String, String)] = [
            ("[\n\(valid),\n{\"description\":\"Cut", "line 3: the JSON object is not closed with '}'"),
            ("[\n\(valid)\n", "line 3: the JSON array is not closed with ']'"),
            ("\(valid)\n{\"description\":\"x\",\"status\":\"someday\",\"uuid\":\"fded4ed6-3126-4d1f-9f8d-d5cfd39373fb\"}\n",
             "line 2: unknown taskwarrior status 'someday' (expected pending, waiting, completed, deleted or recurring)"),
            ("[\(valid),\n{\"description\":\"x\",\"status\":\"pending\"}]", "line 2: a taskwarrior task needs a \"uuid\""),
            ("[\(valid),\n{\"description\":\"x\",\"status\":\"pending\",\"uuid\":\"nope\"}]", "line 2: 'nope' is not a UUID"),
            ("[\(valid),\n{\"description\":\"x\",\"entry\":\"yesterday\",\"status\":\"pending\",\"uuid\":\"fded4ed6-3126-4d1f-9f8d-d5cfd39373fb\"}]",
             "line 2: \"entry\" is not a taskwarrior date (20261123T171934Z)"),
            ("[\(valid),\n{\"description\":\"a\\u001bb\",\"status\":\"pending\",\"uuid\":\"fded4ed6-3126-4d1f-9f8d-d5cfd39373fb\"}]",
             "line 2: a task title cannot contain control characters (found U+001B)"),
            ("[\(valid),\n{\"description\":nope,\"status\":\"pending\",\"uuid\":\"fded4ed6-3126-4d1f-9f8d-d5cfd39373fb\"}]",
             "line 2: not valid JSON"),
            ("# not JSON\n", "line 1: expected a taskwarrior task, a JSON object (the output of 'task export')"),
            ("[\(valid)]\n[", "line 2: something follows the end of the JSON array"),
        ]
        for (input, message) in cases {
            let result = try securestore(["tasks", "import", "--from", "taskwarrior"], app: app, input: input)
            #expect(result.status == 65, "\(message)")
            #expect(result.stderr == "securestore: \(message); nothing was imported\n")
            #expect(result.stdout.isEmpty)
            #expect(try securestore(["tasks", "export"], app: app).stdout == before, "\(message)")
        }

        let combined = try securestore(["tasks", "import", "--from", "taskwarrior", "--format", "csv"], app: app)
        #expect(combined.status == 64)
        #expect(combined.stderr.hasPrefix("securestore: --from and --format cannot be combined\n"))
        let unknown = try securestore(["tasks", "import", "--from", "omnifocus"], app: app)
        #expect(unknown.status == 64)
        #expect(unknown.stderr.hasPrefix("securestore: --from takes one of taskwarrior, todo.txt, not 'omnifocus'\n"))
    }

    @Test func todoTxtDoneMarksPrioritiesAndDatesMapAndASecondImportFindsTheSameTasks() throws {
        let app = uniqueApp()
        let directory = try TemporaryDirectory()
        let file = directory.path + "/todo.txt"
        try write(
            """
            (A) 2026-01-05 Call mom +family @phone
            x 2026-01-07 2026-01-02 File taxes due:2026-04-15
            2026-01-03 Buy milk
            Water plants\r

            Water plants
            x Done without dates
            (B) Priority without date

            """, to: file)
        let first = try securestore(["tasks", "import", "--from", "todo.txt", file], app: app)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout == "imported 7 task(s)\n")
        let tasks = try exported(app)
        #expect(tasks.map(\.title) == [
            "File taxes due:2026-04-15", "Buy milk", "(A) Call mom +family @phone",
            // No creation date: now, one microsecond apart, in the file's order.
            "Water plants", "Water plants", "Done without dates", "(B) Priority without date",
        ])
        #expect(tasks.map(\.done) == [true, false, false, false, false, true, false])
        #expect(tasks.prefix(3).map(\.createdAt) == [
            "2026-01-02T00:00:00.000000Z", "2026-01-03T00:00:00.000000Z", "2026-01-05T00:00:00.000000Z",
        ])
        #expect(Set(tasks.map(\.id)).count == 7, "identical lines are two tasks")
        #expect(tasks.allSatisfy { Array($0.id)[14] == "8" }, "name-based IDs (version 8)")

        let again = try securestore(["tasks", "import", "--from", "todo.txt", "-"], app: app, input: try String(contentsOfFile: file, encoding: .utf8))
        #expect(again.stdout == "imported 0 task(s), skipped 7 duplicate(s)\n")
        #expect(try exported(app) == tasks)

        // Marked done the way todo.sh does it (the priority goes, the dates stay): the same task, now done.
        try write(
            "x 2026-01-09 2026-01-05 Call mom +family @phone\n2026-01-10 Something new\n", to: file)
        let replaced = try securestore(["tasks", "import", "--from", "todo.txt", "--on-duplicate", "replace", file], app: app)
        #expect(replaced.stdout == "imported 1 task(s), replaced 1\n")
        let after = try exported(app)
        let mom = try #require(tasks.first { $0.title.hasSuffix("Call mom +family @phone") })
        #expect(after.first { $0.id == mom.id } == Exported(
            id: mom.id, title: "Call mom +family @phone", done: true, createdAt: "2026-01-05T00:00:00.000000Z"))
        #expect(after.count == 8)
    }

    @Test func aBadTodoTxtLineIsRefusedWithItsNumberAndChangesNothing() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "Existing"], app: app).status == 0)
        let before = try securestore(["tasks", "export"], app: app).stdout
        for (input, message) in [
            ("Fine\n2026-02-30 Not a day\n", "line 2: '2026-02-30' is not a date"),
            ("Fine\nx 2026-01-01\n", "line 2: a task title cannot be empty"),
            ("Fine\n\nTab\u{1b}[31m red\n", "line 3: a task title cannot contain control characters (found U+001B)"),
        ] {
            let result = try securestore(["tasks", "import", "--from", "todo.txt"], app: app, input: input)
            #expect(result.status == 65)
            #expect(result.stderr == "securestore: \(message); nothing was imported\n")
            #expect(try securestore(["tasks", "export"], app: app).stdout == before)
        }
        let missing = try securestore(["tasks", "import", "--from", "todo.txt", "/nonexistent/todo.txt"], app: app)
        #expect(missing.status == 66)
        #expect(missing.stderr == "securestore: cannot read '/nonexistent/todo.txt': No such file or directory\n")
    }

    @Test(.enabled(if: Prerequisites.installed("todo-txt"), "needs todo.txt's CLI (Debian package todotxt-cli)"))
    func aFileWrittenByTodoTxtsOwnToolImports() throws {
        let directory = try TemporaryDirectory()
        let config = directory.path + "/config"
        try write(
            """
            export TODO_DIR=\(directory.path)
            export TODO_FILE=\(directory.path)/todo.txt
            export DONE_FILE=\(directory.path)/done.txt
            export REPORT_FILE=\(directory.path)/report.txt

            """, to: config)
        func todo(_ arguments: [String]) throws {
            let result = try run(["todo-txt", "-d", config, "-t", "-a"] + arguments)
            #expect(result.status == 0, "todo-txt \(arguments): \(result.stderr)")
        }
        try todo(["add", "Call mom +family @phone"])
        try todo(["add", "Buy milk"])
        try todo(["pri", "1", "A"])
        try todo(["do", "2"])
        let written = try String(contentsOfFile: directory.path + "/todo.txt", encoding: .utf8)

        let app = uniqueApp()
        let result = try securestore(["tasks", "import", "--from", "todo.txt", directory.path + "/todo.txt"], app: app)
        #expect(result.status == 0, "\(result.stderr) \(written)")
        #expect(result.stdout == "imported 2 task(s)\n")
        let tasks = try exported(app)
        #expect(Set(tasks.map(\.title)) == ["(A) Call mom +family @phone", "Buy milk"], "\(written)")
        #expect(tasks.first { $0.title == "Buy milk" }?.done == true)
        #expect(tasks.first { $0.title.hasPrefix("(A)") }?.done == false)
        #expect(tasks.allSatisfy { written.contains(" " + $0.createdAt.prefix(10) + " ") }, "todo.sh -t dates")
        #expect(tasks.allSatisfy { $0.createdAt.hasSuffix("T00:00:00.000000Z") })
    }
}

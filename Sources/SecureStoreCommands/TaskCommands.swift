internal import Foundation
internal import SecureStore
internal import SecureStoreCore
internal import Tasks

/// `--all`, `--done`, `--open`: at most one, each with the status it selects.
private let statusFlags: [(flag: Flag, status: TaskList.Filter.Status)] = [
    (Flag("all", help: "Done and open tasks alike (the default; a filter, not a limit: see --limit none)."), .all),
    (Flag("done", help: "Only tasks that are done."), .done),
    (Flag("open", help: "Only tasks that are not done."), .open),
]
private let searchOption = Option<String>(
    "search", valueName: "TEXT", help: "Only tasks whose title has words beginning with each word of TEXT (any case).")
private let statusOptions: [any CommandOption] = statusFlags.map(\.flag) + [searchOption]
/// At most one of the status flags.
private let statusRule = ArgumentRule.exclusive(statusFlags.map(\.flag))

/// `ID`: one task, by its ID or a unique prefix; completed to the task ID prefixes.
let taskIDArgument = Argument("ID", help: "The task's ID or a unique prefix of it.", completion: .asked(.taskIDs))
/// `TITLE…`: the words of a title, joined with spaces.
private let titleArgument = VariadicArgument(
    "TITLE", help: "The task's title (at most 1000 characters); several words are joined with spaces.")
/// `--limit N`, or `--limit none` for every task.
private enum ListLimit: Sendable {
    case count(Int)
    case none
}
private let limitOption = Option<ListLimit>(
    "limit", valueName: "N|none", help: "At most N tasks (default 50); 'none' lists every task, streamed.",
    expected: "a whole number of at least 0, or none",
    convert: { text in
        if text == "none" { return ListLimit.none }
        guard let number = Int(text), number >= 0 else { return nil }
        return .count(number)
    })
private let offsetOption = Option<Int>.wholeNumber("offset", help: "Skip the first N tasks.")
private let oldestFirstFlag = Flag("oldest-first", help: "Oldest first.")
private let totalsFlag = Flag(
    "totals", help: "With --json: an object with the page (\"tasks\") and the totals, instead of the bare array.")

/// Opens the task list in the keyed database of an invocation. Only `create` (`tasks add`) makes the
/// database or the task list's tables; a database that is not a task list is refused either way.
func openTasks(_ invocation: Invocation, create: Bool) throws -> (KeyedDatabase, TaskList) {
    let context = try Context(invocation)
    let database = try openDatabase(invocation, context, create: create)
    do {
        return (database, try TaskList(database: database, createIfMissing: create))
    } catch let error as SecureStoreError where error.code == SecureStoreError.Code.notFound {
        try? database.close()
        throw CLIError(status: ExitStatus.notFound, message: error.message, hint: createHint(database.name))
    } catch {
        try? database.close()
        throw error
    }
}

/// Runs `body` on the task list and closes the database afterwards.
func withTasks(_ invocation: Invocation, create: Bool = false, _ body: (TaskList) throws -> Int32) throws -> Int32 {
    let (database, tasks) = try openTasks(invocation, create: create)
    defer { try? database.close() }
    return try body(tasks)
}

/// The status (at most one flag: a rule of the command) and the search of `tasks list` and `tasks count`.
private func filter(_ invocation: Invocation) throws -> TaskList.Filter {
    let chosen = statusFlags.first { invocation[$0.flag] }
    return TaskList.Filter(status: chosen?.status ?? .all, titleMatches: try invocation[searchOption])
}

private func line(_ task: TaskItem) -> String {
    let id = task.id.uuidString.lowercased().prefix(8)
    // A title is what someone typed or imported: a control or bidi override in it must not act on the terminal.
    return "\(id)  [\(task.done ? "x" : " ")]  \(escapedForTerminal(task.title))"
}

/// One task as the listings show it: ID prefix, done mark, title (escaped for the terminal).
func taskLine(_ task: TaskItem) -> String { line(task) }

/// `tasks list --json`: the array, written as it is read (the records of `tasks export --format json`); with
/// `--totals` inside an object whose other keys, sorted as every `--json` object's, come from the same snapshot.
private func streamJSON(
    _ snapshot: TaskList.Snapshot, _ filter: TaskList.Filter, _ order: TaskList.Order, _ offset: Int, _ limit: Int?,
    totals: Bool
) throws {
    var writer = TaskStreamWriter(format: .json, fileDescriptor: 1, name: "standard output")
    var terminator = "\n"
    if totals {
        let counts = try snapshot.counts()
        let matching = try snapshot.count(filter)
        try writer.write(
            verbatim: "{\"done\":\(counts.done),\"limit\":\(limit.map(String.init) ?? "null"),\"matching\":\(matching),"
                + "\"offset\":\(offset),\"open\":\(counts.open),\"tasks\":")
        terminator = ",\"total\":\(counts.total)}\n"
    }
    try writer.begin()
    try snapshot.forEachTask(filter, order: order, offset: offset, limit: limit) { try writer.encode($0) }
    try writer.end(terminator: terminator)
}

/// `tasks list`: one line per task, written through a 64 KiB buffer as the tasks are read, then on standard
/// error "(1–50 of 1000)" when the page is not everything (or standard output is a terminal).
private func streamText(
    _ snapshot: TaskList.Snapshot, _ filter: TaskList.Filter, _ order: TaskList.Order, _ offset: Int, _ limit: Int?
) throws {
    var buffer: [UInt8] = []
    buffer.reserveCapacity(1 << 16 + 4_096)
    func flush() {
        buffer.withUnsafeBytes { Console.write($0) }
        buffer.removeAll(keepingCapacity: true)
    }
    let shown = try snapshot.forEachTask(filter, order: order, offset: offset, limit: limit) { task in
        appendLine(task, to: &buffer)
        if buffer.count >= 1 << 16 { flush() }
    }
    flush()
    // A short page reached the end: the total is known without counting (a count with --search is a scan).
    let total = shown < (limit ?? Int.max) && (shown > 0 || offset == 0) ? offset + shown : try snapshot.count(filter)
    if Console.stdoutIsTerminal || shown < total {
        let range = shown == 0 ? "none" : "\(offset + 1)–\(offset + shown)"
        Console.err("(\(range) of \(total))\n")
    }
}

/// ``line(_:)`` and its line break, appended as bytes: a title of printable ASCII as it is, anything else
/// through ``escapedForTerminal(_:limit:)``.
private func appendLine(_ task: TaskItem, to out: inout [UInt8]) {
    withUnsafeBytes(of: task.id.uuid) { bytes in
        for byte in bytes.prefix(4) {
            appendHex(byte, to: &out)
        }
    }
    out.append(contentsOf: task.done ? doneMark : openMark)
    var title = task.title
    title.withUTF8 { bytes in
        if bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
            out.append(contentsOf: bytes)
        } else {
            out.append(contentsOf: escapedForTerminal(task.title).utf8)
        }
    }
    out.append(0x0A)
}
private let doneMark = Array("  [x]  ".utf8)
private let openMark = Array("  [ ]  ".utf8)

/// Prints one changed task (or its JSON).
private func printTask(_ task: TaskItem, _ invocation: Invocation) throws {
    if invocation.global.json {
        try Console.json(TaskJSON(task))
    } else {
        Console.out(line(task) + "\n")
    }
}

/// `securestore tasks …`: the encrypted task list.
let tasksCommand = Command(
    name: "tasks", abstract: "The encrypted task list (add, list, complete, rename, delete).",
    discussion: """
        Tasks live in the encrypted database 'tasks' (see 'securestore db info'); its key is created in the
        keyring on first use. An ID may be given by a unique prefix, as git does with commits.
        """,
    subcommands: [
        Command(
            name: "add", abstract: "Add a task and print it.",
            arguments: [titleArgument],
            options: [nameOption],
            run: { invocation in
                // `tasks add Buy milk` adds "Buy milk", as taskwarrior and todo.sh do.
                let title = try invocation[titleArgument].joined(separator: " ")
                return try withTasks(invocation, create: true) { tasks in
                    try printTask(try tasks.create(title: title), invocation)
                    return ExitStatus.success
                }
            }),
        Command(
            name: "list", abstract: "List tasks, newest first, a page at a time (or all of them: --limit none).",
            discussion: """
                Streams: the tasks are written as they are read, in one read transaction, so memory stays the same
                whatever the number of tasks. --all is the status filter (done and open); --limit none lifts the
                page size. With --json an array of the tasks (the records of 'tasks export --format json').
                """,
            options: statusOptions + [limitOption, offsetOption, oldestFirstFlag, totalsFlag, nameOption],
            rules: [statusRule],
            run: { invocation in
                let filter = try filter(invocation)
                let limit: Int?
                switch try invocation[limitOption] ?? .count(50) {
                case .count(let count): limit = count
                case .none: limit = nil
                }
                let offset = try invocation[offsetOption] ?? 0
                let order: TaskList.Order = invocation[oldestFirstFlag] ? .oldestFirst : .newestFirst
                return try withTasks(invocation) { tasks in
                    try tasks.snapshot { snapshot in
                        if invocation.global.json {
                            try streamJSON(snapshot, filter, order, offset, limit, totals: invocation[totalsFlag])
                        } else {
                            try streamText(snapshot, filter, order, offset, limit)
                        }
                    }
                    return ExitStatus.success
                }
            }),
        Command(
            name: "count", abstract: "Count tasks without loading them.",
            options: statusOptions + [nameOption],
            rules: [statusRule],
            run: { invocation in
                let filter = try filter(invocation)
                return try withTasks(invocation) { tasks in
                    let count = try tasks.count(filter)
                    if invocation.global.json { try Console.json(TaskCountJSON(count: count)) } else { Console.out("\(count)\n") }
                    return ExitStatus.success
                }
            }),
        tasksExportCommand,
        tasksImportCommand,
        tasksAttachCommand,
        tasksAttachmentsCommand,
        tasksAttachmentCommand,
        tasksDetachCommand,
        tasksShowCommand,
        tasksDoneCommand,
        tasksUndoCommand,
        tasksDeleteCommand,
        tasksRenameCommand,
        tasksClearDoneCommand,
        tasksDoneAllCommand,
    ])

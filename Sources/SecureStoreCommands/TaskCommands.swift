import Foundation
import SecureStore
import SecureStoreCore
import Tasks

/// `--all`, `--done`, `--open`: at most one, each with the status it selects.
private let statusFlags: [(flag: Flag, status: TaskList.Filter.Status)] = [
    (Flag("all", help: "Every task (the default)."), .all),
    (Flag("done", help: "Only tasks that are done."), .done),
    (Flag("open", help: "Only tasks that are not done."), .open),
]
private let searchOption = Option<String>(
    "search", valueName: "TEXT", help: "Only tasks whose title contains TEXT (ASCII case-insensitive).")
private let statusOptions: [any CommandOption] = statusFlags.map(\.flag) + [searchOption]
private let limitOption = Option<Int>.wholeNumber("limit", help: "At most N tasks (default 50).")
private let offsetOption = Option<Int>.wholeNumber("offset", help: "Skip the first N tasks.")
private let oldestFirstFlag = Flag("oldest-first", help: "Oldest first.")
private let totalsFlag = Flag(
    "totals", help: "With --json: an object with the page (\"tasks\") and the totals, instead of the bare array.")

/// Opens the task list in the keyed database of an invocation. Only `create` (`tasks add`) makes the
/// database or the task list's tables; a database that is not a task list is refused either way.
private func openTasks(_ invocation: Invocation, create: Bool) throws -> (KeyedDatabase, TaskList) {
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

private func filter(_ invocation: Invocation) throws -> TaskList.Filter {
    let chosen = statusFlags.filter { invocation[$0.flag] }
    guard chosen.count <= 1 else {
        throw UsageError("give at most one of --all, --done, --open", path: invocation.path)
    }
    return TaskList.Filter(status: chosen.first?.status ?? .all, titleContains: try invocation[searchOption])
}

private func line(_ task: TaskItem) -> String {
    let id = task.id.uuidString.lowercased().prefix(8)
    // A title is what someone typed or imported: a control or bidi override in it must not act on the terminal.
    return "\(id)  [\(task.done ? "x" : " ")]  \(escapedForTerminal(task.title))"
}

/// One task as the listings show it: ID prefix, done mark, title (escaped for the terminal).
func taskLine(_ task: TaskItem) -> String { line(task) }

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
            arguments: [
                ArgumentSpec(
                    name: "TITLE", help: "The task's title (at most 1000 characters); several words are joined with spaces.",
                    variadic: true)
            ],
            options: [nameOption],
            run: { invocation in
                // `tasks add Buy milk` adds "Buy milk", as taskwarrior and todo.sh do.
                let title = invocation.arguments.joined(separator: " ")
                return try withTasks(invocation, create: true) { tasks in
                    try printTask(try tasks.create(title: title), invocation)
                    return ExitStatus.success
                }
            }),
        Command(
            name: "list", abstract: "List tasks, newest first, a page at a time.",
            options: statusOptions + [limitOption, offsetOption, oldestFirstFlag, totalsFlag, nameOption],
            run: { invocation in
                let filter = try filter(invocation)
                let limit = try invocation[limitOption] ?? 50
                let offset = try invocation[offsetOption] ?? 0
                return try withTasks(invocation) { tasks in
                    let page = try tasks.page(
                        filter, order: invocation[oldestFirstFlag] ? .oldestFirst : .newestFirst, offset: offset, limit: limit)
                    if invocation.global.json && invocation[totalsFlag] {
                        let counts = try tasks.counts()
                        try Console.json(
                            TaskPageJSON(
                                tasks: page.items.map(TaskJSON.init), matching: page.total, total: counts.total,
                                done: counts.done, open: counts.open, offset: offset, limit: limit))
                    } else if invocation.global.json {
                        try Console.json(page.items.map(TaskJSON.init))
                    } else {
                        for task in page.items { Console.out(line(task) + "\n") }
                        if Console.stdoutIsTerminal || page.items.count < page.total {
                            let shown = page.items.isEmpty ? "none" : "\(offset + 1)–\(offset + page.items.count)"
                            Console.err("(\(shown) of \(page.total))\n")
                        }
                    }
                    return ExitStatus.success
                }
            }),
        Command(
            name: "count", abstract: "Count tasks without loading them.",
            options: statusOptions + [nameOption],
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

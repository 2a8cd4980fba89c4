import Foundation
import SecureStore
import Tasks

private let statusOptions = [
    OptionSpec(name: "all", help: "Every task (the default)."),
    OptionSpec(name: "done", help: "Only tasks that are done."),
    OptionSpec(name: "open", help: "Only tasks that are not done."),
    OptionSpec(name: "search", valueName: "TEXT", help: "Only tasks whose title contains TEXT (ASCII case-insensitive)."),
]
private let nameOption = OptionSpec(name: "name", valueName: "NAME", help: "The database (default: tasks).")

/// Opens the task list in the keyed database of an invocation. Only `create` (`tasks add`) makes the
/// database or the task list's tables; a database that is not a task list is refused either way.
private func openTasks(_ invocation: Invocation, create: Bool) throws -> (KeyedDatabase, TaskList) {
    let context = try Context(invocation)
    let database = try openDatabase(invocation, context, create: create)
    do {
        return (database, try TaskList(queue: database.queue, createIfMissing: create))
    } catch let error as SecureStoreError where error.code == SecureStoreError.Code.notFound {
        try? database.close()
        throw CLIError(status: ExitStatus.notFound, message: error.message, hint: createHint(database.name))
    } catch {
        try? database.close()
        throw error
    }
}

/// Runs `body` on the task list and closes the database afterwards.
private func withTasks(_ invocation: Invocation, create: Bool = false, _ body: (TaskList) throws -> Int32) throws -> Int32 {
    let (database, tasks) = try openTasks(invocation, create: create)
    defer { try? database.close() }
    return try body(tasks)
}

private func filter(_ invocation: Invocation) throws -> TaskList.Filter {
    let chosen = ["all", "done", "open"].filter { invocation.flag($0) }
    guard chosen.count <= 1 else {
        throw UsageError("give at most one of --all, --done, --open", path: invocation.path)
    }
    let status: TaskList.Filter.Status =
        switch chosen.first {
        case "done": .done
        case "open": .open
        default: .all
        }
    return TaskList.Filter(status: status, titleContains: invocation.value("search"))
}

/// RFC 3339 in UTC with milliseconds, e.g. 2026-11-21T06:03:17.818Z.
private func formatDate(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.string(from: date)
}

private func json(_ task: TaskItem) -> [String: Any] {
    ["id": task.id.uuidString.lowercased(), "title": task.title, "done": task.done, "created": formatDate(task.createdAt)]
}

private func line(_ task: TaskItem) -> String {
    let id = task.id.uuidString.lowercased().prefix(8)
    return "\(id)  [\(task.done ? "x" : " ")]  \(task.title)"
}

/// Prints one changed task (or its JSON).
private func printTask(_ task: TaskItem, _ invocation: Invocation) throws {
    if invocation.global.json {
        try Console.json(json(task))
    } else {
        Console.out(line(task) + "\n")
    }
}

private func idCommand(_ name: String, _ abstract: String, _ action: @escaping @Sendable (TaskList, TaskItem) throws -> TaskItem) -> Command {
    Command(
        name: name, abstract: abstract,
        arguments: [ArgumentSpec(name: "ID", help: "The task's ID or a unique prefix of it.")],
        options: [nameOption],
        run: { invocation in
            try withTasks(invocation) { tasks in
                let task = try tasks.resolve(prefix: invocation.argument(0) ?? "")
                try printTask(try action(tasks, task), invocation)
                return ExitStatus.success
            }
        })
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
            arguments: [ArgumentSpec(name: "TITLE", help: "The task's title (at most 1000 characters).")],
            options: [nameOption],
            run: { invocation in
                try withTasks(invocation, create: true) { tasks in
                    try printTask(try tasks.create(title: invocation.argument(0) ?? ""), invocation)
                    return ExitStatus.success
                }
            }),
        Command(
            name: "list", abstract: "List tasks, newest first, a page at a time.",
            options: statusOptions + [
                OptionSpec(name: "limit", valueName: "N", help: "At most N tasks (default 50)."),
                OptionSpec(name: "offset", valueName: "N", help: "Skip the first N tasks."),
                OptionSpec(name: "oldest-first", help: "Oldest first."),
                nameOption,
            ],
            run: { invocation in
                let filter = try filter(invocation)
                let limit = try invocation.integer("limit") ?? 50
                let offset = try invocation.integer("offset") ?? 0
                return try withTasks(invocation) { tasks in
                    let page = try tasks.page(
                        filter, order: invocation.flag("oldest-first") ? .oldestFirst : .newestFirst, offset: offset, limit: limit)
                    if invocation.global.json {
                        try Console.json(page.items.map(json))
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
                    if invocation.global.json { try Console.json(["count": count]) } else { Console.out("\(count)\n") }
                    return ExitStatus.success
                }
            }),
        idCommand("done", "Mark a task done.") { tasks, task in try tasks.setDone(true, id: task.id) },
        idCommand("undo", "Mark a task not done.") { tasks, task in try tasks.setDone(false, id: task.id) },
        idCommand("delete", "Delete a task.") { tasks, task in try tasks.delete(id: task.id) },
        Command(
            name: "rename", abstract: "Change a task's title.",
            arguments: [
                ArgumentSpec(name: "ID", help: "The task's ID or a unique prefix of it."),
                ArgumentSpec(name: "TITLE", help: "The new title."),
            ],
            options: [nameOption],
            run: { invocation in
                try withTasks(invocation) { tasks in
                    let task = try tasks.resolve(prefix: invocation.argument(0) ?? "")
                    try printTask(try tasks.rename(id: task.id, to: invocation.argument(1) ?? ""), invocation)
                    return ExitStatus.success
                }
            }),
        Command(
            name: "clear-done", abstract: "Delete every task that is done.",
            options: [nameOption],
            run: { invocation in
                try withTasks(invocation) { tasks in
                    let count = try tasks.deleteAllDone()
                    if invocation.global.json { try Console.json(["deleted": count]) } else { Console.out("deleted \(count) done task(s)\n") }
                    return ExitStatus.success
                }
            }),
        Command(
            name: "done-all", abstract: "Mark every open task done.",
            options: [nameOption],
            run: { invocation in
                try withTasks(invocation) { tasks in
                    let count = try tasks.markAllDone()
                    if invocation.global.json { try Console.json(["updated": count]) } else { Console.out("marked \(count) task(s) done\n") }
                    return ExitStatus.success
                }
            }),
    ])

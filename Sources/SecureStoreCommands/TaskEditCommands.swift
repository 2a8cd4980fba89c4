// `tasks show | done | undo | delete | rename | clear-done | done-all`: the commands that read or change tasks by
// ID, in the habits of taskwarrior and git (several IDs at once, words joined into a title), and the bulk ones that
// say what they will do and ask first (Confirmation.swift).
internal import Foundation
internal import SecureStore
internal import SecureStoreCore
internal import Tasks

/// `ID…`: one or more task IDs or unique prefixes.
private let idsArgument = VariadicArgument(
    "ID", help: "The task's ID or a unique prefix of it; several IDs change all of them or none.", completion: .asked(.taskIDs))
/// `tasks rename ID TITLE…`: the new title's words.
private let newTitleArgument = VariadicArgument(
    "TITLE", help: "The new title; several words are joined with spaces (as 'tasks add' does).")

/// Every task of `prefixes`, resolved before anything changes: when one does not resolve, the error names it and
/// nothing has been changed.
private func resolveAll(_ tasks: TaskList, _ prefixes: [String]) throws -> [TaskItem] {
    try prefixes.map { prefix in
        do {
            return try tasks.resolve(prefix: prefix)
        } catch let error as SecureStoreError where prefixes.count > 1 {
            throw SecureStoreError(
                error.code, "\(UsageError.quoted(prefix)): \(error.message); nothing was changed",
                databaseName: error.databaseName, path: error.path)
        }
    }
}

/// The tasks `done`, `undo` or `delete` changed: one line each, or with `--json` an array of them, whatever the
/// number of IDs given (one shape for scripts: `jq '.[]'`).
private func printTasks(_ items: [TaskItem], _ invocation: Invocation) throws {
    if invocation.global.json {
        try Console.json(items.map(TaskJSON.init))
    } else {
        for item in items { Console.out(taskLine(item) + "\n") }
    }
}

/// `tasks done|undo|delete ID…`: every ID resolved first, then all changed in one transaction.
private func idsCommand(
    _ name: String, _ abstract: String, _ action: @escaping @Sendable (TaskList, [UUID]) throws -> [TaskItem]
) -> Command {
    Command(
        name: name, abstract: abstract, arguments: [idsArgument], options: [nameOption],
        run: { invocation in
            try withTasks(invocation) { tasks in
                let found = try resolveAll(tasks, try invocation[idsArgument])
                try printTasks(try action(tasks, found.map(\.id)), invocation)
                return ExitStatus.success
            }
        })
}

let tasksDoneCommand = idsCommand("done", "Mark tasks done (several IDs: all or none).") { tasks, ids in
    try tasks.setDone(true, ids: ids)
}

let tasksUndoCommand = idsCommand("undo", "Mark tasks not done (several IDs: all or none).") { tasks, ids in
    try tasks.setDone(false, ids: ids)
}

let tasksDeleteCommand = idsCommand("delete", "Delete tasks and their attachments (several IDs: all or none).") {
    tasks, ids in
    let deleted = try tasks.delete(ids: ids)
    // Their attachments' descriptions went with them (a trigger); their encrypted chunks go now.
    _ = try? tasks.attachments().store.collectGarbage()
    return deleted
}

let tasksRenameCommand = Command(
    name: "rename", abstract: "Change a task's title.",
    arguments: [taskIDArgument, newTitleArgument],
    options: [nameOption],
    run: { invocation in
        // `tasks rename 3f2a Buy oat milk` renames to "Buy oat milk", as `tasks add` joins its words.
        let title = try invocation[newTitleArgument].joined(separator: " ")
        let prefix = try invocation[taskIDArgument]
        return try withTasks(invocation) { tasks in
            let task = try tasks.resolve(prefix: prefix)
            let renamed = try tasks.rename(id: task.id, to: title)
            // One task, so one object (as `tasks add` and `tasks show` print it).
            if invocation.global.json { try Console.json(TaskJSON(renamed)) } else { Console.out(taskLine(renamed) + "\n") }
            return ExitStatus.success
        }
    })

/// `tasks show --json`: the task's fields and its attachments.
struct TaskShowJSON: Encodable {
    let id: String
    let title: String
    let done: Bool
    let createdAt: String
    let attachments: [AttachmentJSON]

    init(_ task: TaskItem, attachments: [Attachment]) {
        let json = TaskJSON(task)
        id = json.id
        title = json.title
        done = json.done
        createdAt = json.createdAt
        self.attachments = attachments.map(AttachmentJSON.init)
    }
}

let tasksShowCommand = Command(
    name: "show", abstract: "Show one task in full, with its attachments.",
    arguments: [taskIDArgument],
    options: [nameOption],
    run: { invocation in
        try withTasks(invocation) { tasks in
            let task = try tasks.resolve(prefix: try invocation[taskIDArgument])
            let store = tasks.attachments()
            defer { try? store.store.close() }
            let attachments = try store.list(of: task.id)
            if invocation.global.json {
                try Console.json(TaskShowJSON(task, attachments: attachments))
                return ExitStatus.success
            }
            let json = TaskJSON(task)
            var lines = [
                "id           \(json.id)",
                // A title is what someone typed or imported: nothing in it may act on the terminal.
                "title        \(escapedForTerminal(task.title))",
                "status       \(task.done ? "done" : "open")",
                "created      \(json.createdAt)",
                "attachments  " + (attachments.isEmpty ? "none" : "\(attachments.count)"),
            ]
            lines += attachments.map { "  " + attachmentLine($0) }
            Console.out(lines.joined(separator: "\n") + "\n")
            return ExitStatus.success
        }
    })

let tasksClearDoneCommand = Command(
    name: "clear-done", abstract: "Delete every task that is done (asks first on a terminal; --yes for scripts).",
    options: [yesFlag, nameOption],
    run: { invocation in
        try requireYesOffTerminal(invocation, "deletes every task that is done")
        return try withTasks(invocation) { tasks in
            let done = try tasks.counts().done
            try confirm(
                done == 0 ? nil : "delete \(counted(done, "done task")) and their attachments from database "
                    + "'\(try databaseName(invocation))'", invocation)
            let count = try tasks.deleteAllDone()
            _ = try? tasks.attachments().store.collectGarbage()
            if invocation.global.json {
                try Console.json(TasksDeletedJSON(deleted: count))
            } else {
                Console.out("deleted \(count) done task(s)\n")
            }
            return ExitStatus.success
        }
    })

let tasksDoneAllCommand = Command(
    name: "done-all", abstract: "Mark every open task done (asks first on a terminal; --yes for scripts).",
    options: [yesFlag, nameOption],
    run: { invocation in
        try requireYesOffTerminal(invocation, "marks every open task done")
        return try withTasks(invocation) { tasks in
            let open = try tasks.counts().open
            try confirm(
                open == 0 ? nil : "mark \(counted(open, "open task")) of database '\(try databaseName(invocation))' done",
                invocation)
            let count = try tasks.markAllDone()
            if invocation.global.json {
                try Console.json(TasksUpdatedJSON(updated: count))
            } else {
                Console.out("marked \(count) task(s) done\n")
            }
            return ExitStatus.success
        }
    })

// `tasks export` and `tasks import`: JSON Lines, CSV or one JSON array, streamed in both directions so that
// memory does not depend on the number of tasks (Docs/cli.md, "Export and import").
internal import Foundation
internal import Glibc
internal import SecureStore
internal import SecureStoreCore
internal import Tasks

typealias TransferFormat = TaskStreamFormat

/// Export writes no `lines`.
let exportFormatOption = Option<TransferFormat>.oneOf(
    "format", valueName: "FORMAT", help: "jsonl (default: one JSON object per line), csv or json (one array).",
    TransferFormat.allCases.filter { $0 != .lines })
let importFormatOption = Option<TransferFormat>.oneOf(
    "format", valueName: "FORMAT", help: "jsonl (default), csv, json (one array) or lines (one title per line).",
    TransferFormat.allCases)
let outputOption = Option<String>(
    "output", valueName: "FILE", help: "Write to FILE (mode 0600, replaced atomically when complete) instead of stdout.",
    completion: .files)
let batchOption = Option<Int>.wholeNumber(
    "batch", help: "Commit every N tasks (default: everything in one transaction).", minimum: 1)
let duplicateOption = Option<TasksDuplicatePolicy>.oneOf(
    "on-duplicate", valueName: "POLICY", help: "skip, replace or fail (default) when a task's ID exists.",
    TasksDuplicatePolicy.allCases)
typealias TasksDuplicatePolicy = TaskList.DuplicatePolicy
let importSourceOption = Option<TaskImportSource>.oneOf(
    "from", valueName: "TOOL",
    help: "Read another tool's file instead: taskwarrior (the output of 'task export') or todo.txt.",
    TaskImportSource.allCases)
/// `tasks import [FILE]`: none, or `-`, is standard input.
private let importFileArgument = OptionalArgument(
    "FILE", help: "The file to read (default, or -: standard input).", completion: .files)

// MARK: The output file

/// A file created 0600 next to `path` (O_EXCL, a fresh name), renamed over `path` by ``commit()`` once the
/// export is complete: `path` is replaced atomically, and left as it was when the export fails.
final class AtomicOutputFile {
    let path: String
    let temporaryPath: String
    let fd: Int32
    private var committed = false

    init(path: String) throws {
        self.path = path
        let directory = (path as NSString).deletingLastPathComponent
        let base = (path as NSString).lastPathComponent
        // Named as every temporary file of the product (ScratchFiles), and registered before it exists: removed on
        // SIGINT/SIGTERM/SIGHUP, and swept by a later command when a kill -9 left it.
        ScratchFiles.sweep(directory)
        temporaryPath = ScratchFiles.path(near: (directory.isEmpty ? "." : directory) + "/" + base)
        ScratchFiles.register(temporaryPath)
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(temporaryPath, [.writeOnly, .create, .exclusive, .noFollow])
        } catch {
            ScratchFiles.unregister(temporaryPath)
            throw CLIError(
                status: ExitStatus.cannotCreate, message: "cannot create the file \(UsageError.quoted(path)): \(error)")
        }
        try? file.setMode(0o600)  // said again whatever the umask: it is the promise
        self.fd = file.rawValue
    }

    func commit() throws {
        do {
            try FileDescriptor(rawValue: fd).sync()
            try renameFile(temporaryPath, to: path)
        } catch {
            throw CLIError(status: ExitStatus.ioError, message: "cannot write the file \(UsageError.quoted(path)): \(error)")
        }
        committed = true
    }

    deinit {
        FileDescriptor(rawValue: fd).close()
        if !committed { try? removeFile(temporaryPath) }
        ScratchFiles.unregister(temporaryPath)
    }
}

// MARK: Commands

let tasksExportCommand = Command(
    name: "export", abstract: "Write every task, oldest first, as JSON Lines, CSV or a JSON array.",
    discussion: """
        Streams: memory stays the same whatever the number of tasks. Keys (and CSV columns) are those of
        --json: createdAt (RFC 3339, UTC, to the microsecond), done, id, title. With --output, FILE is written
        under a temporary name (mode 0600) and renamed over FILE when complete: an existing FILE is replaced
        atomically, and left unchanged if the export fails.
        """,
    options: [exportFormatOption, outputOption, nameOption],
    run: { invocation in
        let format = try invocation[exportFormatOption] ?? .jsonl
        let output = try invocation[outputOption]
        return try withTasks(invocation) { tasks in
            let file = try output.map(AtomicOutputFile.init)
            var encoder = TaskStreamWriter(
                format: format, fileDescriptor: file?.fd ?? 1, name: output.map(UsageError.quoted) ?? "standard output")
            let total = Console.stderrIsTerminal ? try tasks.count() : 0
            var written = 0
            try encoder.begin()
            try tasks.forEachTask { task in
                try encoder.encode(task)
                written += 1
                if written % 65_536 == 0 { Console.progress("exporting", done: written, total: total) }
            }
            try encoder.end()
            try file?.commit()
            Console.progress("exporting", done: total, total: total)
            if output != nil {
                Console.err("exported \(written) task(s) to \(UsageError.quoted(output ?? ""))\n")
            }
            return ExitStatus.success
        }
    })

let tasksImportCommand = Command(
    name: "import", abstract: "Add tasks from JSON Lines, CSV, a JSON array or plain lines of titles.",
    discussion: """
        Reads FILE, or standard input without one, as a stream. A record with only a title (a JSON string,
        {"title": …}, a one-column CSV, or any line with --format lines) gets a new ID and the current time.
        Everything is one transaction unless --batch N: then every N tasks are committed, and an error keeps
        the batches before it. A bad record stops the import with its line number (exit 65).
        --from taskwarrior or --from todo.txt reads another tool's file (Docs/tasks.md has the mapping): IDs
        and creation dates are kept, and a task already imported keeps its ID, so importing the same file
        again adds only what is new (--on-duplicate is skip by default there; replace brings changes over).
        """,
    arguments: [importFileArgument],
    options: [importFormatOption, importSourceOption, batchOption, duplicateOption, nameOption],
    rules: [.exclusive([importSourceOption, importFormatOption])],
    run: { invocation in
        let source = try invocation[importSourceOption]
        let format = try invocation[importFormatOption] ?? .jsonl
        let batch = try invocation[batchOption]
        // Another tool's file is read again and again as people move over: what is there already stays.
        let policy = try invocation[duplicateOption] ?? (source == nil ? .fail : .skip)
        let path = try invocation[importFileArgument].flatMap { $0 == "-" ? nil : $0 }
        var file = FileDescriptor(rawValue: 0)
        var size = 0
        if let path {
            do throws(Errno) {
                file = try FileDescriptor.open(path, .readOnly)
            } catch {
                let status = error == .noSuchFileOrDirectory ? ExitStatus.notFound : ExitStatus.ioError
                throw CLIError(status: status, message: "cannot read \(UsageError.quoted(path)): \(error)")
            }
            if let status = try? file.fileStatus(), status.isRegularFile { size = status.size }
        }
        defer { if path != nil { file.close() } }
        let fd = file.rawValue
        let inputName = path.map(UsageError.quoted) ?? "standard input"
        let decoder = TaskStreamReader(format: format, fileDescriptor: fd, name: inputName)
        let foreign = source.map { ForeignTaskReader(source: $0, fileDescriptor: fd, name: inputName) }
        var inputLine: Int { foreign?.line ?? decoder.line }
        var bytesRead: Int { foreign?.bytesRead ?? decoder.bytesRead }
        // The line of each task of the chunk the library holds (it reads ahead a chunk and names a duplicate by
        // its position in the input): a ring as long as a chunk, so memory stays flat.
        var lines = [Int](repeating: 0, count: TaskList.importChunkCount + 1)
        var read = 0
        let next = {
            let task: TaskItem?
            if let foreign { task = try foreign.next() } else { task = try decoder.next() }
            if task != nil {
                read += 1
                lines[read % lines.count] = inputLine
            }
            return task
        }
        return try withTasks(invocation, create: true) { tasks in
            let summary: TaskList.ImportSummary
            var committed = TaskList.ImportSummary()
            do {
                // Titles as written: a record with an ID restores a task exactly (what export wrote, whatever the
                // table held); the reader checks the titles of new tasks (and of another tool's) as `tasks add` does.
                summary = try tasks.importTasks(
                    onDuplicate: policy, batchSize: batch, titles: source == nil ? .exact : .validated,
                    progress: { done in
                        committed = done
                        Console.progress("importing", done: bytesRead, total: size)
                    },
                    next: next)
            } catch let error as SecureStoreError where error.code == SecureStoreError.Code.invalidData {
                // The reader's own message names the line.
                throw CLIError(status: ExitStatus.dataError, message: error.message + keptNote(committed, batch))
            } catch let error as SecureStoreError
                where error.code == SecureStoreError.Code.invalidArgument || error.code == SecureStoreError.Code.alreadyExists
            {
                // The library counts tasks ("task 3: …"); a person wants the line.
                var message = error.message
                var line = inputLine
                if message.hasPrefix("task "), let colon = message.firstIndex(of: ":") {
                    if let position = Int(message[message.index(message.startIndex, offsetBy: 5)..<colon]),
                        position <= read, read - position < lines.count
                    {
                        line = lines[position % lines.count]
                    }
                    message = String(message[message.index(after: colon)...].dropFirst())
                }
                throw CLIError(status: ExitStatus.dataError, message: "line \(line): \(message)\(keptNote(committed, batch))")
            }
            let leftOut = foreign.map { LeftOutJSON(deleted: $0.leftOutDeleted, recurring: $0.leftOutRecurring) }
            if invocation.global.json {
                try Console.json(TasksImportedJSON(summary, leftOut: source == .taskwarrior ? leftOut : nil))
            } else {
                var left: [String] = []
                if let leftOut, leftOut.deleted > 0 { left.append("\(leftOut.deleted) deleted") }
                if let leftOut, leftOut.recurring > 0 { left.append("\(leftOut.recurring) recurrence template(s)") }
                Console.out("imported \(summary.inserted) task(s)"
                    + (summary.replaced > 0 ? ", replaced \(summary.replaced)" : "")
                    + (summary.skipped > 0 ? ", skipped \(summary.skipped) duplicate(s)" : "")
                    + (left.isEmpty ? "" : "; left out \(left.joined(separator: " and "))") + "\n")
            }
            return ExitStatus.success
        }
    })

/// What an error leaves behind: nothing, or the batches committed before it.
private func keptNote(_ committed: TaskList.ImportSummary, _ batch: Int?) -> String {
    batch == nil || committed.read == 0
        ? "; nothing was imported"
        : "; the \(committed.read) task(s) of the batches before it were imported (\(committed.inserted) added)"
}

/// `tasks import --json`; `leftOut` is null but with `--from taskwarrior` (a missing value is null, never a missing
/// key: Docs/cli.md, "JSON output").
struct TasksImportedJSON: Encodable {
    let inserted: Int
    let replaced: Int
    let skipped: Int
    let leftOut: LeftOutJSON?

    init(_ summary: TaskList.ImportSummary, leftOut: LeftOutJSON? = nil) {
        inserted = summary.inserted
        replaced = summary.replaced
        skipped = summary.skipped
        self.leftOut = leftOut
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(inserted, forKey: .inserted)
        try container.encode(leftOut, forKey: .leftOut)
        try container.encode(replaced, forKey: .replaced)
        try container.encode(skipped, forKey: .skipped)
    }

    private enum CodingKeys: String, CodingKey { case inserted, leftOut, replaced, skipped }
}

/// What `tasks import --from taskwarrior` did not import: deleted tasks and recurrence templates.
struct LeftOutJSON: Encodable {
    let deleted: Int
    let recurring: Int
}

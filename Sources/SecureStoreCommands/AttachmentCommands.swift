internal import Foundation
internal import EncryptedDatabase
internal import SecureStore
internal import SecureStoreCore
internal import Sync
internal import Tasks

// `securestore tasks attach | attachments | attachment get | detach`: encrypted attachments of tasks
// (Docs/attachments.md).

private let attachNameOption = Option<String>(
    "as", valueName: "NAME", help: "The attachment's name (required when reading standard input; default: the file's name).")
private let mediaTypeOption = Option<String>(
    "type", valueName: "TYPE", help: "The media type, e.g. image/png (default: guessed from the name's extension).")
private let maxSizeOption = Option<Int64>(
    "max-size", valueName: "SIZE", help: "Refuse an attachment larger than SIZE (bytes, or with K, M, G: 1024-based; default 16G).",
    expected: "a size such as 500M or 2G", convert: parseSize)

/// `FILE…` of `tasks attach`: none, or `-`, is standard input.
private let filesArgument = VariadicArgument(
    "FILE", help: "Files to attach ('-' or nothing: standard input).", completion: .files
).allowingNone()
/// `ATTACHMENT`: one attachment, by its ID or a unique prefix; completed to the attachment ID prefixes.
private let attachmentArgument = Argument(
    "ATTACHMENT", help: "The attachment's ID or a unique prefix of it.", completion: .asked(.attachmentIDs))

/// `123`, `64K`, `500M`, `2G` (1024-based) as bytes.
func parseSize(_ text: String) -> Int64? {
    var digits = Substring(text)
    var multiplier: Int64 = 1
    if let last = digits.last, let unit = ["K": Int64(1) << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40][last.uppercased()] {
        multiplier = unit
        digits = digits.dropLast()
    }
    guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let value = Int64(digits), value >= 0 else { return nil }
    let (product, overflow) = value.multipliedReportingOverflow(by: multiplier)
    return overflow ? nil : product
}

/// Progress of one attachment, on a terminal, for attachments of 8 MiB and more.
private func showProgress(_ verb: String) -> (AttachmentProgress) -> Void {
    { progress in
        guard let total = progress.total, total >= 8 << 20 else { return }
        Console.progress("\(verb) \(escapedForTerminal(progress.name))", done: Int(progress.bytes), total: Int(total))
    }
}

/// The attachments of a task: a JSON array with `--json`, else one line each.
private func printAttachments(_ attachments: [Attachment], _ invocation: Invocation) throws {
    if invocation.global.json {
        try Console.json(attachments.map(AttachmentJSON.init))
    } else {
        for attachment in attachments { Console.out(attachmentLine(attachment) + "\n") }
    }
}

/// One attachment as `tasks attachments` and `tasks show` list it: ID prefix, size, media type, name.
func attachmentLine(_ attachment: Attachment) -> String {
    "\(attachment.hexID.prefix(8))  \(AttachmentJSON.sizeText(attachment.size))  \(escapedForTerminal(attachment.mediaType))  "
        + escapedForTerminal(attachment.name)
}

/// Runs `body` with the task list's attachments, under the options of the invocation.
private func withAttachments(
    _ invocation: Invocation, _ body: (TaskList, TaskAttachments) throws -> Int32
) throws -> Int32 {
    var configuration = AttachmentStoreConfiguration()
    if let limit = try invocation[maxSizeOption] { configuration.maximumSize = limit }
    let (database, tasks) = try openTasks(invocation, create: false)
    defer { try? database.close() }
    // On a synced database, a read of an attachment whose bytes are not here yet (sync --attachments lazy) fetches
    // them from the local copy of the remote, checked, or names what is missing (Docs/sync.md, "Attachments").
    configuration = SyncEngine.attachmentStoreConfiguration(database: database, configuration)
    let attachments = tasks.attachments(configuration: configuration)
    defer { try? attachments.store.close() }
    return try body(tasks, attachments)
}

let tasksAttachCommand = Command(
    name: "attach", abstract: "Attach files to a task, encrypted (or standard input with --as NAME).",
    discussion: """
        Each FILE is read once, in chunks, and stored encrypted in the database's attachments file
        ('<name>.attachments.db' beside it); memory stays the same whatever the size. A file of up to 64 KiB is
        kept inside the database itself instead (listed with "inline": true by --json). Either every FILE is
        attached or none is: a file that changes, shrinks or disappears while being read, one over --max-size, or
        a full disk leaves the task as it was. Without FILE (or with '-'), standard input is attached under --as.
        """,
    arguments: [taskIDArgument, filesArgument],
    options: [attachNameOption, mediaTypeOption, maxSizeOption, nameOption],
    run: { invocation in
        let files = try invocation[filesArgument]
        let prefix = try invocation[taskIDArgument]
        let name = try invocation[attachNameOption]
        let type = try invocation[mediaTypeOption]
        var sources: [AttachmentSource] = []
        if files.isEmpty || files == ["-"] {
            guard let name else {
                throw UsageError("reading standard input needs a name: --as NAME", path: invocation.path)
            }
            if Console.stdinIsTerminal {
                throw UsageError("standard input is a terminal; give FILE, or pipe the data in", path: invocation.path)
            }
            sources = [.fileDescriptor(0, name: name, mediaType: type)]
        } else {
            if files.contains("-") {
                throw UsageError("'-' (standard input) cannot be mixed with files", path: invocation.path)
            }
            if name != nil, files.count > 1 {
                throw UsageError("--as names one attachment; give one FILE with it", path: invocation.path)
            }
            sources = files.map { AttachmentSource.file($0, name: name, mediaType: type) }
        }
        return try withAttachments(invocation) { tasks, attachments in
            let task = try tasks.resolve(prefix: prefix)
            let added = try attachments.add(sources, to: task.id, progress: showProgress("attaching"))
            try printAttachments(added, invocation)
            return ExitStatus.success
        }
    })

let tasksAttachmentsCommand = Command(
    name: "attachments", abstract: "List a task's attachments, oldest first.",
    arguments: [taskIDArgument],
    options: [nameOption],
    run: { invocation in
        try withAttachments(invocation) { tasks, attachments in
            let task = try tasks.resolve(prefix: try invocation[taskIDArgument])
            let list = try attachments.list(of: task.id)
            try printAttachments(list, invocation)
            return ExitStatus.success
        }
    })

let tasksAttachmentCommand = Command(
    name: "attachment", abstract: "Read an attachment back.",
    subcommands: [
        Command(
            name: "get", abstract: "Write an attachment to standard output or to a file.",
            discussion: """
                The attachment is decrypted chunk by chunk; every chunk is authenticated before it is written, and
                its SHA-256 digest is checked at the end. With --output, FILE is written under a temporary name
                (mode 0600) and renamed over FILE only when the whole attachment checked out: a damaged attachment
                never leaves a FILE with wrong bytes. With --json, --output is required (the bytes are not JSON),
                and the attachment's description is printed once FILE is in place.
                """,
            arguments: [attachmentArgument],
            options: [outputOption, nameOption],
            // Standard output would carry the bytes, which are not JSON: refused before anything is read.
            rules: [
                .requires(
                    GlobalOption.json, outputOption,
                    message: "--json needs --output FILE here: the attachment's bytes are not JSON (with --output, "
                        + "--json prints its description)")
            ],
            run: { invocation in
                let output = try invocation[outputOption]
                let prefix = try invocation[attachmentArgument]
                return try withAttachments(invocation) { _, attachments in
                    let attachment = try attachments.resolve(prefix: prefix)
                    let file = try output.map(AtomicOutputFile.init)
                    let fd = file?.fd ?? 1
                    do {
                        try attachments.store.read(attachment, progress: showProgress("reading")) { bytes in
                            try writeAll(fd, bytes, to: output)
                        }
                    } catch let error as SecureStoreError where error.code == .verificationFailed {
                        // What was delivered went to the temporary file, which goes with this error.
                        guard let output else { throw error }
                        throw SecureStoreError(
                            error.code, error.message + " (to a temporary file, now removed); \(UsageError.quoted(output)) was not written")
                    }
                    try file?.commit()
                    if invocation.global.json { try Console.json(AttachmentJSON(attachment)) }
                    return ExitStatus.success
                }
            })
    ])

let tasksDetachCommand = Command(
    name: "detach", abstract: "Delete an attachment.",
    arguments: [attachmentArgument],
    options: [nameOption],
    run: { invocation in
        try withAttachments(invocation) { _, attachments in
            let attachment = try attachments.resolve(prefix: try invocation[attachmentArgument])
            let deleted = try attachments.delete(id: attachment.id)
            if invocation.global.json {
                try Console.json(AttachmentJSON(deleted))
            } else {
                Console.out("detached " + attachmentLine(deleted) + "\n")
            }
            return ExitStatus.success
        }
    })

/// Writes all of `bytes` to `fd`, or throws naming the destination; a closed standard output ends the process
/// quietly (``Console/write(_:)``).
private func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, to output: String?) throws {
    guard let failure = Console.writeAll(fd, bytes) else { return }
    if failure == .brokenPipe && output == nil { Console.endAsIfByBrokenPipe() }
    throw CLIError(
        status: ExitStatus.ioError,
        message: "cannot write \(output.map { UsageError.quoted($0) } ?? "standard output"): \(failure)")
}

/// `--json` form of an attachment: its ID and its task's (`taskId`) as lower-case UUIDs with dashes, `createdAt`
/// as every timestamp (RFC 3339, UTC, six fractional digits).
struct AttachmentJSON: Encodable {
    let id: String
    /// Null only for an attachment whose owner is not a task (never, through the task commands).
    @Nullable var taskId: String?
    let name: String
    let mediaType: String
    let size: Int64
    let sha256: String
    /// Kept inside the database itself (small attachments) rather than as chunks in the attachments file.
    let inline: Bool
    let createdAt: String

    init(_ attachment: Attachment) {
        id = attachment.id.uuidString.lowercased()
        taskId = attachment.owner.key.count == 16
            ? attachment.owner.key.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }.uuidString.lowercased()
            : nil
        name = attachment.name
        mediaType = attachment.mediaType
        size = attachment.size
        sha256 = attachment.sha256
        inline = attachment.isInline
        createdAt = timestampText(attachment.createdAt)
    }
    /// A size for a person (the core's one rule: `812 bytes`, `1.4 MiB`).
    static func sizeText(_ size: Int64) -> String { byteCountText(size) }
}

// MARK: db info and db verify

/// `db info`'s lines about the attachments file (none when no attachment was ever added).
func attachmentInfoLines(_ database: KeyedDatabase) throws -> [String] {
    let store = database.attachmentStore()
    let (count, total) = try store.summary()
    guard count > 0 || fileExists(store.path, followingLinks: true) else { return [] }
    let fileSize = (try? fileStatus(store.path, followingLinks: false)).map { Int64($0.size) }
    // The format is reported when the file opens read-only (a hot journal left by a crash needs a writer first).
    let format = (try? store.cipherInfo())?.flatMap { $0 }.map { ", format \($0.format.name)" } ?? ""
    let storage = try store.storage()
    // Free pages (deleted attachments, failed attaches): reused by the next attachments, never given back.
    let unused = fileSize == nil ? nil : (try? store.unusedBytes()).flatMap { $0 }
    let free = unused.map { $0 > 0 ? ", \(AttachmentJSON.sizeText($0)) of it unused and reused by the next attachments" : "" } ?? ""
    let file = fileSize.map { "'\(store.path)' (\(AttachmentJSON.sizeText($0)) on disk\(free)\(format); its key is kept inside the database)" }
        ?? "'\(store.path)' (missing)"
    var line = "attachments: \(count) (\(AttachmentJSON.sizeText(total)))"
    if storage.chunkedCount == 0 && (storage.inlineCount > 0 || fileSize == nil) {
        // Empty attachments need no file either: only chunked ones do.
        line += ", all inside the database" + (fileSize == nil ? "" : "; attachments file " + file)
    } else if storage.inlineCount > 0 {
        line += ", \(storage.inlineCount) of them (\(AttachmentJSON.sizeText(storage.inlineSize))) inside the database, the rest in " + file
    } else {
        line += " in " + file
    }
    return [line]
}

/// `db verify`'s check of the attachments: every chunk authenticated, every digest matched; exit 1 otherwise.
func verifyAttachments(_ database: KeyedDatabase, _ invocation: Invocation) throws {
    let store = database.attachmentStore()
    defer { try? store.close() }
    let (count, _) = try store.summary()
    guard count > 0 || fileExists(store.path, followingLinks: true) else { return }
    // A device that syncs attachments lazily holds no byte of those it has not read yet: not damage.
    let notFetched = try syncsAttachments(database) ? Set(try store.attachmentsWithoutBytes().map(\.id)) : []
    let report = try store.verify(skipping: notFetched)
    if !invocation.global.json {
        Console.out(
            "attachments: \(report.attachmentCount) (\(AttachmentJSON.sizeText(report.totalSize)))"
                + (notFetched.isEmpty
                    ? " read back in full, "
                    : ": \(report.attachmentCount - notFetched.count) read back in full, \(notFetched.count) not on this device yet "
                        + "(this device syncs attachments lazily: their bytes are fetched from the sync remote when first read, "
                        + "or by 'securestore sync now --attachments eager'); ")
                + (report.problems.isEmpty ? "every chunk authenticated and every SHA-256 digest matched" : "\(report.problems.count) damaged")
                + (report.collected > 0 ? "; removed the chunks of \(report.collected) unfinished or deleted attachment(s)" : "")
                + "\n")
    }
    if let first = report.problems.first {
        throw CLIError(
            status: ExitStatus.checkFailed,
            message: first + (report.problems.count > 1 ? " (and \(report.problems.count - 1) more)" : ""))
    }
}

/// Whether `database` syncs (its attachments' bytes may then be on the sync remote only).
func syncsAttachments(_ database: KeyedDatabase) throws -> Bool {
    try database.read { db in try db.tableExists("sync_state") && db.tableExists("securestore_attachments") }
}

/// Before a backup of a database that syncs attachments lazily: fetches (from the local copy of the remote, checked)
/// the bytes of every attachment this device has not read yet, so that the backup is whole. Throws, writing
/// nothing, when some cannot be fetched.
func fetchAttachmentsBeforeBackup(_ database: KeyedDatabase) throws {
    guard try syncsAttachments(database) else { return }
    let store = database.attachmentStore()
    defer { try? store.close() }
    let missing = try store.attachmentsWithoutBytes()
    guard !missing.isEmpty else { return }
    let engine = try SyncEngine(database: database)
    for attachment in missing {
        do {
            try engine.fetchAttachment(attachment)
        } catch let error as SyncError {
            throw CLIError(
                status: error.code == SyncError.Code.refusedBundle ? ExitStatus.dataError : ExitStatus.notFound,
                message: "the bytes of \(missing.count) attachment(s) are only on the sync remote (this device syncs attachments "
                    + "lazily) and could not all be fetched: \(error.message); a backup without them would not restore, so none "
                    + "was written",
                hint: "run 'securestore sync now' and try again")
        }
    }
    Console.err(
        "fetched the bytes of \(missing.count) attachment(s) from the sync remote first (this device syncs attachments lazily), "
            + "so that the backup holds them\n")
}

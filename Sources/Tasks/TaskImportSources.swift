// Reading the task files of other tools: taskwarrior's `task export` and todo.txt. Streamed like the tool's own
// formats (one record in memory at a time); each record becomes a TaskItem with an ID that does not change when
// the same file is read again, so that a second import finds the tasks of the first (Docs/tasks.md, "Importing
// from taskwarrior and todo.txt").
internal import Foundation
internal import SecureStore
internal import SecureStoreCore

/// The other tools whose task files ``ForeignTaskReader`` reads.
public enum TaskImportSource: String, Sendable, CaseIterable {
    /// taskwarrior's `task export`: a JSON array of tasks (or one JSON object per line, as older versions and
    /// `rc.json.array=off` write).
    case taskwarrior
    /// A todo.txt file: one task per line (`x 2026-01-02 2026-01-01 (A) Call mom +family @phone`).
    case todoTxt = "todo.txt"
}

/// Reads the tasks of a ``TaskImportSource`` from a file descriptor, one at a time, for
/// ``TaskList/importTasks(onDuplicate:batchSize:titles:progress:next:)``.
///
/// ```swift
/// let reader = ForeignTaskReader(source: .taskwarrior, fileDescriptor: fd, name: "'tasks.json'")
/// let summary = try tasks.importTasks(onDuplicate: .skip, next: reader.next)
/// print(reader.leftOutDeleted, reader.leftOutRecurring)
/// ```
///
/// How fields map:
/// - taskwarrior: `uuid` is the task's ID; `description` its title (trimmed and checked as `tasks add` does);
///   `entry` its creation date (now when absent). `status` `pending` and `waiting` are open tasks, `completed` is
///   done; `deleted` tasks and `recurring` templates (taskwarrior's parents of recurring tasks, whose instances
///   are exported as tasks of their own) are left out and counted in ``leftOutDeleted`` and ``leftOutRecurring``.
///   Other fields (`end`, `modified`, `due`, `wait`, `project`, `tags`, `priority`, annotations, `urgency`) have no
///   place in the task list and are dropped.
/// - todo.txt: a line starting with `x ` is done; its completion date is dropped; a creation date
///   (`YYYY-MM-DD`, taken as midnight UTC) is the creation date, else now (one microsecond apart per line, so
///   the file's order is kept). The rest of the line, priority `(A)`, `+project`, `@context` and `key:value`
///   tags included, is the title. The ID is derived from the creation date and the text after the priority (a
///   SHA-256 name-based UUID, version 8): it stays the same when a task is prioritized or marked done, so a
///   second import of the same file finds the same tasks. Identical lines get IDs of their own (the second is
///   told apart by its rank).
public final class ForeignTaskReader {
    /// The tool whose file is read.
    public let source: TaskImportSource
    let reader: ByteReader
    /// The line where the task last returned (or the bad record) starts, for messages.
    public private(set) var line = 0
    /// Bytes read so far, for progress.
    public var bytesRead: Int { reader.consumed }
    /// taskwarrior tasks with the status `deleted`, which are not imported.
    public private(set) var leftOutDeleted = 0
    /// taskwarrior recurrence templates (status `recurring`), which are not imported.
    public private(set) var leftOutRecurring = 0

    private var nextLine = 1
    private var lineBytes: [UInt8] = []
    /// taskwarrior: whether the input started with `[` and whether its `]` was seen.
    private var inArray = false
    private var started = false
    private var finished = false
    private var lastNow: Int64 = 0
    /// todo.txt: how many times each identity was seen, so identical lines get IDs of their own. Grows with the
    /// number of lines (32 bytes each): todo.txt files are read by people, a few thousand lines at most.
    private var seen: [[UInt8]: Int] = [:]

    /// A reader of `source` on the open file descriptor `fileDescriptor` (not closed here); `name` is what error
    /// messages call it.
    public init(source: TaskImportSource, fileDescriptor: Int32, name: String) {
        self.source = source
        self.reader = ByteReader(fd: fileDescriptor, name: name)
    }

    /// The next task, or nil at the end of the input.
    ///
    /// - Throws: ``SecureStoreError/Code/invalidData`` with "line N: …" for a record that is not a task of the source
    ///   (or whose title ``TaskList/validatedTitle(_:)`` refuses), ``SecureStoreError/Code/fileSystem`` when reading
    ///   fails.
    public func next() throws -> TaskItem? {
        switch source {
        case .taskwarrior:
            while let object = try readObject() {
                if let task = try taskwarriorTask(object) { return task }
            }
            return nil
        case .todoTxt:
            while try readLine() {
                if let task = try todoTask() { return task }
            }
            return nil
        }
    }

    // MARK: taskwarrior

    private func readByte() throws -> UInt8? {
        let byte = try reader.next()
        if byte == 0x0A { nextLine += 1 }
        return byte
    }

    private static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    /// The bytes of the next top-level JSON object, in an array (`[{…},{…}]`) or one after the other (JSON Lines).
    private func readObject() throws -> [UInt8]? {
        while true {
            guard let byte = try readByte() else {
                if inArray && !finished { throw invalid(nextLine, "the JSON array is not closed with ']'") }
                return nil
            }
            if Self.isSpace(byte) { continue }
            if finished { throw invalid(nextLine, "something follows the end of the JSON array") }
            if !started {
                started = true
                if byte == UInt8(ascii: "[") {
                    inArray = true
                    continue
                }
            }
            if inArray && byte == UInt8(ascii: "]") {
                finished = true
                continue
            }
            if inArray && byte == UInt8(ascii: ",") { continue }
            guard byte == UInt8(ascii: "{") else {
                throw invalid(nextLine, "expected a taskwarrior task, a JSON object (the output of 'task export')")
            }
            line = nextLine
            var bytes: [UInt8] = [byte]
            var depth = 1
            var inString = false
            var escaped = false
            while depth > 0 {
                guard let current = try readByte() else { throw invalid(line, "the JSON object is not closed with '}'") }
                bytes.append(current)
                if inString {
                    if escaped { escaped = false } else if current == UInt8(ascii: "\\") { escaped = true } else if current == UInt8(ascii: "\"") { inString = false }
                    continue
                }
                switch current {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
                default: break
                }
            }
            return bytes
        }
    }

    /// The task of one exported object, or nil for one that is left out (deleted, a recurrence template).
    private func taskwarriorTask(_ bytes: [UInt8]) throws -> TaskItem? {
        let object: [String: Any]
        do {
            guard let parsed = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
                throw invalid(line, "not a JSON object")
            }
            object = parsed
        } catch let error as SecureStoreError {
            throw error
        } catch {
            throw invalid(line, "not valid JSON")
        }
        guard let status = object["status"] as? String else {
            throw invalid(line, "a taskwarrior task needs a \"status\" (pending, waiting, completed, deleted or recurring)")
        }
        let done: Bool
        switch status {
        case "pending", "waiting": done = false
        case "completed": done = true
        case "deleted":
            leftOutDeleted += 1
            return nil
        case "recurring":
            leftOutRecurring += 1
            return nil
        default:
            throw invalid(
                line, "unknown taskwarrior status \(quotedText(status)) (expected pending, waiting, completed, deleted or recurring)")
        }
        guard let uuidText = object["uuid"] as? String else { throw invalid(line, "a taskwarrior task needs a \"uuid\"") }
        guard let id = UUID(uuidString: uuidText) else { throw invalid(line, "\(quotedText(uuidText)) is not a UUID") }
        guard let description = object["description"] as? String else {
            throw invalid(line, "a taskwarrior task needs a \"description\" (a string)")
        }
        let microseconds: Int64
        if let entry = object["entry"] {
            guard let text = entry as? String, let parsed = Self.taskwarriorDate(text) else {
                throw invalid(line, "\"entry\" is not a taskwarrior date (20261123T171934Z)")
            }
            microseconds = parsed
        } else {
            microseconds = now()
        }
        return TaskItem(id: id, title: try checked(description), done: done, createdAtMicrosecondsSince1970: microseconds)
    }

    /// taskwarrior's date, `YYYYMMDDTHHMMSSZ` (UTC), or RFC 3339; microseconds since 1970.
    static func taskwarriorDate(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count == 16, b[8] == UInt8(ascii: "T"), b[15] == UInt8(ascii: "Z") else { return parseRFC3339(text) }
        func part(_ range: Range<Int>) -> String { String(decoding: b[range], as: UTF8.self) }
        return parseRFC3339(
            "\(part(0..<4))-\(part(4..<6))-\(part(6..<8))T\(part(9..<11)):\(part(11..<13)):\(part(13..<15))Z")
    }

    // MARK: todo.txt

    /// The next line into ``lineBytes``, without its line break; false at the end.
    private func readLine() throws -> Bool {
        try reader.readLine(into: &lineBytes, number: &line, next: &nextLine)
    }

    /// The task of the current todo.txt line, or nil for a blank line.
    private func todoTask() throws -> TaskItem? {
        guard let text = String(validating: lineBytes, as: UTF8.self) else { throw invalid(line, "not valid UTF-8") }
        var rest = Substring(text)
        while let first = rest.first, first == " " || first == "\t" { rest = rest.dropFirst() }
        if rest.isEmpty { return nil }
        var done = false
        var created: Int64? = nil
        if rest.hasPrefix("x ") {
            done = true
            rest = rest.dropFirst(2)
            // Completion date, then creation date: the first date after `x ` is the completion date.
            if try takeDate(&rest) != nil { created = try takeDate(&rest) }
        } else {
            var afterPriority = rest
            if takePriority(&afterPriority) {
                if let date = try takeDate(&afterPriority) {
                    created = date
                    // The priority stays in the title, where the person wrote it; the date becomes the field.
                    rest = rest.prefix(4) + afterPriority
                }
            } else {
                created = try takeDate(&rest)
            }
        }
        let title = try checked(String(rest))
        // The identity: creation date and the text after any priority (todo.sh drops the priority on `do`).
        var identityText = Substring(title)
        _ = takePriority(&identityText)
        var identity = Array("todo.txt\u{0}\(created.map(String.init) ?? "")\u{0}".utf8) + Array(identityText.utf8)
        let rank = seen[identity, default: 0]
        seen[identity] = rank + 1
        if rank > 0 { identity += Array("\u{0}\(rank)".utf8) }
        return TaskItem(
            id: try Self.nameBasedID(identity), title: title, done: done, createdAtMicrosecondsSince1970: created ?? now())
    }

    /// Removes a leading `(A) ` (A to Z) from `text`; whether there was one.
    private func takePriority(_ text: inout Substring) -> Bool {
        let b = Array(text.utf8.prefix(4))
        guard b.count == 4, b[0] == UInt8(ascii: "("), (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b[1]),
            b[2] == UInt8(ascii: ")"), b[3] == UInt8(ascii: " ")
        else { return false }
        text = text.dropFirst(4)
        return true
    }

    /// Removes a leading `YYYY-MM-DD ` (or a date that ends the line) from `text`: midnight UTC of that day in
    /// microseconds since 1970, nil when `text` does not start with a date; an error for one that looks like a
    /// date but is not one (2026-02-30).
    private func takeDate(_ text: inout Substring) throws -> Int64? {
        let b = Array(text.utf8.prefix(11))
        guard b.count >= 10, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
            [0, 1, 2, 3, 5, 6, 8, 9].allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b[$0]) }),
            b.count == 10 || b[10] == UInt8(ascii: " ")
        else { return nil }
        let date = String(decoding: b[0..<10], as: UTF8.self)
        guard let microseconds = parseRFC3339(date + "T00:00:00Z"), Self.isCalendarDate(date) else {
            throw invalid(line, "\(quotedText(date)) is not a date")
        }
        text = text.dropFirst(b.count)
        return microseconds
    }

    /// Whether `YYYY-MM-DD` names a day that exists (the RFC 3339 reader checks ranges, not month lengths).
    static func isCalendarDate(_ date: String) -> Bool {
        let parts = date.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3, (1...12).contains(parts[1]) else { return false }
        let (year, month, day) = (parts[0], parts[1], parts[2])
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        return (1...lengths[month - 1]).contains(day)
    }

    /// A name-based UUID (RFC 9562 version 8) from the SHA-256 of `name`: the same name, the same ID.
    static func nameBasedID(_ name: [UInt8]) throws -> UUID {
        guard let digest = SHA256Digest() else {
            throw SecureStoreError(SecureStoreError.Code.invalidData, "libcrypto cannot compute a SHA-256 digest (out of memory?)")
        }
        name.withUnsafeBytes { digest.update($0) }
        var bytes = Array(digest.finish().prefix(16))
        bytes[6] = bytes[6] & 0x0F | 0x80  // version 8
        bytes[8] = bytes[8] & 0x3F | 0x80  // variant 10
        return UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    // MARK: Shared

    /// Now, then one microsecond later for each task without a date, so that the input's order is kept.
    private func now() -> Int64 {
        let current = TaskItem(title: "").createdAtMicrosecondsSince1970
        lastNow = max(current, lastNow + 1)
        return lastNow
    }

    /// `title` trimmed and checked as `tasks add` takes it, or the reason it is refused, at this line.
    private func checked(_ title: String) throws -> String {
        do {
            return try TaskList.validatedTitle(title)
        } catch let error as SecureStoreError {
            throw invalid(line, error.message)
        }
    }
}

private func invalid(_ line: Int, _ message: String) -> SecureStoreError {
    SecureStoreError(SecureStoreError.Code.invalidData, "line \(line): \(message)")
}

private func quotedText(_ text: String) -> String { "'" + escapedForTerminal(text) + "'" }

// The streaming formats of export and import: JSON Lines, CSV, one JSON array, and lines of titles. Bytes in and
// out through 64 KiB buffers; nothing grows with the number of tasks.
internal import Foundation
internal import Glibc
internal import SecureStore
internal import SecureStoreCore

/// The formats of ``TaskStreamWriter`` and ``TaskStreamReader``.
public enum TaskStreamFormat: String, Sendable, CaseIterable {
    /// JSON Lines: one JSON object per line (the default).
    case jsonl
    /// RFC 4180 CSV with a header line `id,title,done,createdAt`.
    case csv
    /// One JSON array of objects.
    case json
    /// One title per line: for reading only (written as JSON Lines).
    case lines
}

// MARK: Writing

/// A buffered writer on a file descriptor: one write(2) per 64 KiB, never the whole output in memory.
final class BufferedWriter {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private let capacity = 1 << 16
    /// What to call the destination in an error message.
    private let name: String

    init(fd: Int32, name: String) {
        self.fd = fd
        self.name = name
        buffer.reserveCapacity(capacity)
    }

    func write(_ bytes: some Sequence<UInt8>) throws {
        buffer.append(contentsOf: bytes)
        if buffer.count >= capacity { try flush() }
    }

    func write(_ text: String) throws { try write(text.utf8) }

    /// Lets `body` append straight to the buffer (no array per record), then flushes when it is full.
    func append(_ body: (inout [UInt8]) -> Void) throws {
        body(&buffer)
        if buffer.count >= capacity { try flush() }
    }

    func flush() throws {
        do {
            try FileDescriptor(rawValue: fd).writeAll(buffer)
        } catch {
            throw SecureStoreError(SecureStoreError.Code.fileSystem, "cannot write to \(name): \(error)")
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Writes tasks in one format onto a file descriptor through a 64 KiB buffer, byte by byte (no JSONEncoder or
/// date formatter per task: they would dominate the time of a million tasks). Memory stays the same whatever the
/// number of tasks.
///
/// ```swift
/// var writer = TaskStreamWriter(format: .jsonl, fileDescriptor: 1, name: "standard output")
/// try writer.begin()
/// try tasks.forEachTask { try writer.encode($0) }
/// try writer.end()
/// ```
///
/// JSON keys (and CSV columns) are `createdAt` (RFC 3339, UTC, six fractional digits: the stored
/// microseconds, so an export imports back equal), `done`, `id` (lower case, with dashes) and `title`.
public struct TaskStreamWriter {
    /// The format written.
    public let format: TaskStreamFormat
    let writer: BufferedWriter
    private var first = true

    /// A writer of `format` onto the open file descriptor `fileDescriptor` (not closed here); `name` is what
    /// error messages call it.
    public init(format: TaskStreamFormat, fileDescriptor: Int32, name: String) {
        self.format = format
        self.writer = BufferedWriter(fd: fileDescriptor, name: name)
    }

    /// Writes what comes before the first task: the CSV header, the JSON array's `[`.
    public mutating func begin() throws {
        switch format {
        case .csv: try writer.write("id,title,done,createdAt\n")
        case .json: try writer.write("[")
        default: break
        }
    }

    /// Writes what comes after the last task and flushes the buffer. In ``TaskStreamFormat/json`` that is the
    /// array's `]` and then `terminator` (a line break by default; give `""` when the array is inside a larger
    /// document that goes on, written with ``write(verbatim:)``).
    public mutating func end(terminator: String = "\n") throws {
        if format == .json { try writer.write((first ? "]" : "\n]") + terminator) }
        try writer.flush()
    }

    /// Writes `text` as it is, through the same buffer: what surrounds the records when the array is part of a
    /// larger document, such as `{"tasks":` before ``begin()`` and `}` after ``end(terminator:)``.
    public mutating func write(verbatim text: String) throws {
        try writer.write(text)
    }

    /// Writes one task (buffered: one write(2) per 64 KiB).
    public mutating func encode(_ task: TaskItem) throws {
        let format = format
        let first = first
        self.first = false
        try writer.append { line in
            switch format {
            case .csv:
                appendID(task.id, to: &line)
                line.append(UInt8(ascii: ","))
                appendCSV(task.title, to: &line)
                line.append(contentsOf: task.done ? Bytes.csvTrue : Bytes.csvFalse)
                appendTimestamp(task.createdAtMicrosecondsSince1970, to: &line)
                line.append(UInt8(ascii: "\n"))
            case .json, .jsonl, .lines:
                if format == .json {
                    if !first { line.append(UInt8(ascii: ",")) }
                    line.append(UInt8(ascii: "\n"))
                }
                line.append(contentsOf: Bytes.createdAt)
                appendTimestamp(task.createdAtMicrosecondsSince1970, to: &line)
                line.append(contentsOf: task.done ? Bytes.doneTrue : Bytes.doneFalse)
                appendID(task.id, to: &line)
                line.append(contentsOf: Bytes.title)
                appendJSONString(task.title, to: &line)
                line.append(UInt8(ascii: "}"))
                if format != .json { line.append(UInt8(ascii: "\n")) }
            }
        }
    }
}

extension TaskItem {
    /// The creation date as every task record of the tool writes it: RFC 3339 in UTC with the six fractional
    /// digits the database stores (`2026-11-23T17:19:34.123456Z`; a year outside 0000–9999 as ISO 8601's expanded
    /// year, `+294247-…`), so that it reads back to the same microsecond.
    public var createdAtText: String {
        var bytes: [UInt8] = []
        appendTimestamp(createdAtMicroseconds, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The constant pieces of a record, made once.
private enum Bytes {
    static let csvTrue = Array(",true,".utf8)
    static let csvFalse = Array(",false,".utf8)
    static let createdAt = Array("{\"createdAt\":\"".utf8)
    static let doneTrue = Array("\",\"done\":true,\"id\":\"".utf8)
    static let doneFalse = Array("\",\"done\":false,\"id\":\"".utf8)
    static let title = Array("\",\"title\":".utf8)
}

/// The UUID in lower case with dashes, as `TaskJSON` prints it.
func appendID(_ id: UUID, to out: inout [UInt8]) {
    withUnsafeBytes(of: id.uuid) { bytes in
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { out.append(UInt8(ascii: "-")) }
            appendHex(byte, to: &out)
        }
    }
}

/// RFC 4180: quoted when it holds a comma, a quote or a line break, quotes doubled.
func appendCSV(_ text: String, to out: inout [UInt8]) {
    let needsQuotes = text.utf8.contains { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 0x0A || $0 == 0x0D }
    guard needsQuotes else {
        out.append(contentsOf: text.utf8)
        return
    }
    out.append(UInt8(ascii: "\""))
    for byte in text.utf8 {
        if byte == UInt8(ascii: "\"") { out.append(byte) }
        out.append(byte)
    }
    out.append(UInt8(ascii: "\""))
}

// MARK: Reading

/// Reads a file descriptor in 64 KiB blocks, a byte or a line at a time for the parsers.
final class ByteReader {
    private let fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    private var start = 0
    private var end = 0
    private let name: String
    /// Bytes consumed so far, for progress.
    private(set) var consumed = 0

    init(fd: Int32, name: String) {
        self.fd = fd
        self.name = name
    }

    /// The next byte, or nil at the end of the input.
    @inline(__always)
    func next() throws -> UInt8? {
        if start == end {
            guard try fill() else { return nil }
        }
        let byte = buffer[start]
        start += 1
        consumed += 1
        return byte
    }

    /// Appends the bytes up to the next line feed to `line` (without it). `read` is false when the input had
    /// nothing left; `ended` whether a line feed ended the line (not the end of the input).
    func readLine(into line: inout [UInt8]) throws -> (read: Bool, ended: Bool) {
        var read = false
        while true {
            if start == end {
                guard try fill() else { return (read, false) }
            }
            read = true
            let (stop, found) = buffer.withUnsafeBufferPointer { bytes in
                var index = start
                while index < end, bytes[index] != 0x0A { index += 1 }
                line.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                return (index, index < end)
            }
            consumed += stop - start + (found ? 1 : 0)
            start = found ? stop + 1 : stop
            if found { return (true, true) }
        }
    }

    /// The next line into `line` (replacing it), without its line break (LF or CRLF); false at the end. `number`
    /// becomes the line's 1-based number and `next` counts the line feeds read: the one line reader of the import
    /// formats and sources.
    func readLine(into line: inout [UInt8], number: inout Int, next: inout Int) throws -> Bool {
        line.removeAll(keepingCapacity: true)
        number = next
        let (read, ended) = try readLine(into: &line)
        if ended { next += 1 }
        if !read { return false }
        if line.last == 0x0D { line.removeLast() }
        return true
    }

    private func fill() throws -> Bool {
        while true {
            let n: Int
            do {
                n = try buffer.withUnsafeMutableBytes { (bytes) throws(Errno) in try FileDescriptor(rawValue: fd).readSome(into: bytes) }
            } catch {
                throw SecureStoreError(SecureStoreError.Code.fileSystem, "cannot read \(name): \(error)")
            }
            start = 0
            end = n
            return n > 0
        }
    }
}

/// A mistake in the input, at a line.
private func badInput(_ line: Int, _ message: String) -> SecureStoreError {
    SecureStoreError(SecureStoreError.Code.invalidData, "line \(line): \(message)")
}

/// `text` in single quotes, safe to print on a terminal.
private func quoted(_ text: String) -> String { "'" + escapedForTerminal(text) + "'" }

/// Reads tasks in one format from a file descriptor, one record at a time, through a 64 KiB buffer: memory
/// stays the same whatever the size of the input.
///
/// A record with an ID restores a task: its title is kept exactly as written, whatever text it is (an
/// export writes every title the table can hold, control characters included; Docs/tasks.md). A record
/// without one — a JSON string or `{"title": …}`, a one-column CSV record, any line of
/// ``TaskStreamFormat/lines`` — adds a new task: it gets a new ID and the current time (one microsecond later
/// for each, so a list of titles keeps its order), and its title is trimmed and checked as
/// ``TaskList/create(title:done:createdAt:id:)`` does (``TaskList/validatedTitle(_:)``). A CSV header
/// (`id,title,done,createdAt`, or any of those names including `title`) names the columns; without one a record
/// has one column (the title) or four in that order. Blank lines are skipped.
///
/// ```swift
/// let reader = TaskStreamReader(format: .jsonl, fileDescriptor: 0, name: "standard input")
/// try tasks.importTasks(titles: .exact, next: reader.next)
/// ```
public final class TaskStreamReader {
    /// The format read.
    public let format: TaskStreamFormat
    let reader: ByteReader
    /// The line where the record last returned (or the bad one) starts, for messages.
    public private(set) var line = 0
    /// Bytes read so far, for progress.
    public var bytesRead: Int { reader.consumed }
    private var nextLine = 1
    private var started = false
    private var finished = false
    /// The current line (JSON Lines, lines), reused from line to line.
    private var lineBytes: [UInt8] = []
    /// CSV columns by position, from the header (or the default order).
    private var csvColumns: [String]? = nil
    /// The creation date a title-only record gets: now, then one microsecond later for each such record, so
    /// that a list of titles keeps its order.
    private var lastNow: Int64 = 0

    /// A reader of `format` from the open file descriptor `fileDescriptor` (not closed here); `name` is what
    /// error messages call it.
    public init(format: TaskStreamFormat, fileDescriptor: Int32, name: String) {
        self.format = format
        self.reader = ByteReader(fd: fileDescriptor, name: name)
    }

    /// The next task, or nil at the end of the input.
    ///
    /// - Throws: ``SecureStoreError/Code/invalidData`` with "line N: …" for a record that is not a task (or a new
    ///   task whose title ``TaskList/validatedTitle(_:)`` refuses), ``SecureStoreError/Code/fileSystem`` when reading
    ///   fails.
    public func next() throws -> TaskItem? {
        while true {
            switch format {
            case .lines:
                guard try readLine() else { return nil }
                let text = try utf8(lineBytes)
                if text.allSatisfy(\.isWhitespace) { continue }
                return try titleOnly(text)
            case .jsonl:
                guard try readLine() else { return nil }
                if lineBytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
                return try decodeJSON(lineBytes)
            case .json:
                guard let bytes = try readJSONElement() else { return nil }
                return try decodeJSON(bytes)
            case .csv:
                guard let fields = try readCSVRecord() else { return nil }
                if fields.count == 1 && fields[0].isEmpty { continue }
                if csvColumns == nil {
                    let names = Set(["id", "title", "done", "createdAt"])
                    if fields.contains("title") && fields.allSatisfy({ names.contains($0) }) {
                        csvColumns = fields
                        continue
                    }
                    csvColumns = fields.count == 1 ? ["title"] : ["id", "title", "done", "createdAt"]
                }
                return try decodeCSV(fields)
            }
        }
    }

    private func utf8(_ bytes: [UInt8]) throws -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else { throw badInput(line, "not valid UTF-8") }
        return text
    }

    private func now() -> Int64 {
        let current = TaskItem(title: "").createdAtMicrosecondsSince1970
        lastNow = max(current, lastNow + 1)
        return lastNow
    }

    /// A new task: a new ID, now, and the title as `tasks add` would take it.
    private func titleOnly(_ title: String) throws -> TaskItem {
        TaskItem(id: UUID(), title: try checked(title), done: false, createdAtMicrosecondsSince1970: now())
    }

    /// `title` trimmed and checked for a new task, or the reason it is refused, at this line.
    private func checked(_ title: String) throws -> String {
        do {
            return try TaskList.validatedTitle(title)
        } catch let error as SecureStoreError {
            throw badInput(line, error.message)
        }
    }

    /// The next line into ``lineBytes``, without its line break (LF or CRLF); false at the end.
    private func readLine() throws -> Bool {
        try reader.readLine(into: &lineBytes, number: &line, next: &nextLine)
    }

    private func readByte() throws -> UInt8? {
        let byte = try reader.next()
        if byte == 0x0A { nextLine += 1 }
        return byte
    }

    /// The bytes of the next element of a top-level JSON array, found by tracking strings and nesting.
    private func readJSONElement() throws -> [UInt8]? {
        if finished { return nil }
        func skipSpace() throws -> UInt8? {
            while let byte = try readByte() {
                if byte != 0x20 && byte != 0x09 && byte != 0x0A && byte != 0x0D { return byte }
            }
            return nil
        }
        var byte = try skipSpace()
        if !started {
            guard byte == UInt8(ascii: "[") else { throw badInput(nextLine, "a JSON array must start with '['") }
            started = true
            byte = try skipSpace()
            if byte == UInt8(ascii: "]") {
                finished = true
                return nil
            }
        }
        guard var current = byte else { throw badInput(nextLine, "the JSON array is not closed with ']'") }
        line = nextLine
        var bytes: [UInt8] = []
        var depth = 0
        var inString = false
        var escaped = false
        while true {
            if inString {
                if escaped { escaped = false } else if current == UInt8(ascii: "\\") { escaped = true } else if current == UInt8(ascii: "\"") { inString = false }
            } else {
                switch current {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if depth == 0 {
                        if current == UInt8(ascii: "]") {
                            finished = true
                            return bytes
                        }
                        throw badInput(nextLine, "unexpected '}' in the JSON array")
                    }
                    depth -= 1
                case UInt8(ascii: ","):
                    if depth == 0 { return bytes }
                default: break
                }
            }
            bytes.append(current)
            guard let following = try readByte() else { throw badInput(nextLine, "the JSON array is not closed with ']'") }
            current = following
        }
    }

    /// One CSV record (RFC 4180: quoted fields may hold commas, doubled quotes and line breaks), or nil.
    private func readCSVRecord() throws -> [String]? {
        line = nextLine
        guard var byte = try readByte() else { return nil }
        var fields: [String] = []
        var field: [UInt8] = []
        var quoted = false
        var fieldStart = true
        // Whether the field's last byte is a CR outside quotes: the CR of a CRLF line end, not part of the value.
        var bareCR = false
        while true {
            if quoted {
                if byte == UInt8(ascii: "\"") {
                    let following = try readByte()
                    if following == UInt8(ascii: "\"") {
                        field.append(byte)
                        bareCR = false
                    } else {
                        quoted = false
                        guard let following else { break }
                        byte = following
                        continue
                    }
                } else {
                    field.append(byte)
                    bareCR = false
                }
            } else if byte == UInt8(ascii: "\"") && fieldStart {
                quoted = true
            } else if byte == UInt8(ascii: ",") {
                fields.append(try utf8(field))
                field = []
                fieldStart = true
                bareCR = false
                guard let following = try readByte() else { break }
                byte = following
                continue
            } else if byte == 0x0A {
                if bareCR { field.removeLast() }
                break
            } else {
                field.append(byte)
                bareCR = byte == 0x0D
            }
            fieldStart = false
            guard let following = try readByte() else {
                if quoted { throw badInput(line, "a quoted CSV field is not closed") }
                break
            }
            byte = following
        }
        fields.append(try utf8(field))
        return fields
    }

    private func decodeJSON(_ bytes: [UInt8]) throws -> TaskItem {
        if let task = bytes.withUnsafeBufferPointer(decodeExported) { return task }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        } catch {
            throw badInput(line, "not valid JSON")
        }
        if let title = object as? String { return try titleOnly(title) }
        guard let dictionary = object as? [String: Any] else {
            throw badInput(line, "expected a JSON object with a \"title\", or a title as a JSON string")
        }
        for key in dictionary.keys where !["id", "title", "done", "createdAt"].contains(key) {
            throw badInput(line, "unknown key \(quoted(key)) (the keys are id, title, done, createdAt)")
        }
        guard let title = dictionary["title"] as? String else { throw badInput(line, "\"title\" must be a string") }
        var done = false
        if let value = dictionary["done"] {
            guard let flag = value as? Bool else { throw badInput(line, "\"done\" must be true or false") }
            done = flag
        }
        return try task(
            id: dictionary["id"].map { value in
                guard let text = value as? String else { throw badInput(line, "\"id\" must be a string") }
                return text
            }, title: title, done: done,
            createdAt: dictionary["createdAt"].map { value in
                guard let text = value as? String else { throw badInput(line, "\"createdAt\" must be a string") }
                return text
            })
    }

    /// A record exactly as ``TaskStreamWriter`` writes it (keys in that order), read byte by byte without
    /// JSONSerialization, which builds a dictionary of bridged objects per line and was half of an import's time;
    /// nil for anything else, which the general path reads (and judges).
    private func decodeExported(_ b: UnsafeBufferPointer<UInt8>) -> TaskItem? {
        var i = 0
        func skip(_ literal: [UInt8]) -> Bool {
            guard i + literal.count <= b.count else { return false }
            for (offset, byte) in literal.enumerated() where b[i + offset] != byte { return false }
            i += literal.count
            return true
        }
        func upToQuote() -> Range<Int>? {
            let start = i
            while i < b.count {
                let byte = b[i]
                if byte == UInt8(ascii: "\"") { return start..<i }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
                i += 1
            }
            return nil
        }
        guard skip(Bytes.createdAt), let dateRange = upToQuote(),
            let microseconds = parseRFC3339(UnsafeBufferPointer(rebasing: b[dateRange]))
        else { return nil }
        let done: Bool
        if skip(Bytes.doneTrue) { done = true } else if skip(Bytes.doneFalse) { done = false } else { return nil }
        guard let idRange = upToQuote(), let id = parseUUID(UnsafeBufferPointer(rebasing: b[idRange])),
            skip(Bytes.title), skip([UInt8(ascii: "\"")]), let title = decodeJSONString(b, &i), skip([UInt8(ascii: "}")])
        else { return nil }
        while i < b.count, b[i] == 0x20 || b[i] == 0x09 || b[i] == 0x0A || b[i] == 0x0D { i += 1 }
        guard i == b.count else { return nil }
        return TaskItem(id: id, title: title, done: done, createdAtMicrosecondsSince1970: microseconds)
    }

    private func decodeCSV(_ fields: [String]) throws -> TaskItem {
        let columns = csvColumns ?? []
        guard fields.count == columns.count else {
            throw badInput(line, "\(fields.count) CSV fields, expected \(columns.count) (\(columns.joined(separator: ",")))")
        }
        var values: [String: String] = [:]
        for (name, value) in zip(columns, fields) { values[name] = value }
        var done = false
        if let text = values["done"] {
            switch text.lowercased() {
            case "true", "1", "yes", "x": done = true
            case "false", "0", "no", "": done = false
            default: throw badInput(line, "done must be true or false, not \(quoted(text))")
            }
        }
        return try task(
            id: values["id"].flatMap { $0.isEmpty ? nil : $0 }, title: values["title"] ?? "", done: done,
            createdAt: values["createdAt"].flatMap { $0.isEmpty ? nil : $0 })
    }

    /// A task from its fields: with an ID, a task restored as written; without, a new task (checked title).
    private func task(id: String?, title: String, done: Bool, createdAt: String?) throws -> TaskItem {
        let uuid: UUID
        let title = id == nil ? try checked(title) : title
        if let id {
            guard let parsed = UUID(uuidString: id) ?? hexUUID(id) else { throw badInput(line, "\(quoted(id)) is not a task ID") }
            uuid = parsed
        } else {
            uuid = UUID()
        }
        let microseconds: Int64
        if let createdAt {
            guard let parsed = parseRFC3339(createdAt) else {
                throw badInput(line, "\(quoted(createdAt)) is not an RFC 3339 date (2026-11-23T17:19:34.123456Z)")
            }
            microseconds = parsed
        } else {
            microseconds = now()
        }
        return TaskItem(id: uuid, title: title, done: done, createdAtMicrosecondsSince1970: microseconds)
    }
}

/// The JSON string starting at `b[i]` (just after its opening quote), with its escapes decoded, and `i` moved
/// past its closing quote; nil when it is not a valid JSON string of Unicode text (a raw control character, an
/// unknown escape, a lone surrogate, bytes that are not UTF-8).
func decodeJSONString(_ b: UnsafeBufferPointer<UInt8>, _ i: inout Int) -> String? {
    let start = i
    while i < b.count {
        let byte = b[i]
        if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { break }
        i += 1
    }
    guard i < b.count, b[i] != 0x0A, b[i] >= 0x20 else { return nil }
    if b[i] == UInt8(ascii: "\"") {
        let text = String(validating: UnsafeBufferPointer(rebasing: b[start..<i]), as: UTF8.self)
        i += 1
        return text
    }
    var out = Array(UnsafeBufferPointer(rebasing: b[start..<i]))
    func hex4(_ at: Int) -> UInt32? {
        guard at + 4 <= b.count else { return nil }
        var value: UInt32 = 0
        for index in at..<(at + 4) {
            let byte = b[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }
    while i < b.count {
        let byte = b[i]
        if byte == UInt8(ascii: "\"") {
            i += 1
            return String(validating: out, as: UTF8.self)
        }
        if byte < 0x20 { return nil }
        i += 1
        guard byte == UInt8(ascii: "\\") else {
            out.append(byte)
            continue
        }
        guard i < b.count else { return nil }
        let escape = b[i]
        i += 1
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            guard var value = hex4(i) else { return nil }
            i += 4
            if (0xD800..<0xDC00).contains(value) {
                guard i + 6 <= b.count, b[i] == UInt8(ascii: "\\"), b[i + 1] == UInt8(ascii: "u"), let low = hex4(i + 2),
                    (0xDC00..<0xE000).contains(low)
                else { return nil }
                i += 6
                value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let scalar = Unicode.Scalar(value) else { return nil }
            out.append(contentsOf: UTF8.encode(scalar)!)
        default: return nil
        }
    }
    return nil
}

/// A UUID written as 36 characters with dashes (either case), without Foundation's `sscanf`.
func parseUUID(_ b: UnsafeBufferPointer<UInt8>) -> UUID? {
    guard b.count == 36, b[8] == 0x2D, b[13] == 0x2D, b[18] == 0x2D, b[23] == 0x2D else { return nil }
    var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    let ok = withUnsafeMutableBytes(of: &uuid) { out -> Bool in
        var index = 0
        var high: UInt8? = nil
        var written = 0
        while index < 36 {
            defer { index += 1 }
            if index == 8 || index == 13 || index == 18 || index == 23 { continue }
            let byte = b[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return false
            }
            if let first = high {
                out[written] = first << 4 | digit
                written += 1
                high = nil
            } else {
                high = digit
            }
        }
        return written == 16
    }
    return ok ? UUID(uuid: uuid) : nil
}

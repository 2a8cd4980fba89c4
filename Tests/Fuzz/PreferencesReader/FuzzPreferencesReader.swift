// libFuzzer entry point for the preferences file reader.
//
// run-fuzz.sh compiles this file together with every file of Sources/Preferences into one module, so the
// internal reader and writer (FormatReader, FormatWriter) are reachable without changing the package.
// Each input is the whole contents of a domain file. Properties checked (a violation traps, and libFuzzer
// saves the input):
//   1. reading never crashes, whatever the bytes;
//   2. the public entry point, Preferences(location:), reading the same bytes from a file, either gives
//      exactly the values the reader gives, or throws a PreferencesError (damaged-file, or
//      unsupported-format for a newer version) whose message begins with the file's path; when the
//      reader reports a syntax error the message carries its "line L, column C", and L and C lie
//      within the input; an error without a position is only for a well-formed JSON document with the
//      wrong envelope (checked against Foundation's JSONSerialization) or an empty file; the message
//      is one line of printable text (keys it quotes have newlines and escapes written as \u{…});
//   3. a document that parses, written back by the module's writer and read again, gives the same
//      values (doubles bit for bit: -0.0, NaN; strings and keys byte for byte; dates to the exact
//      interval), and writing those gives the same bytes again;
//   4. the size accounting (compactSize, the unit of every limit) equals the length of the compact text;
//   5. the audit runs on anything that loads;
//   6. the date writer (the first eight bytes as a Date's bit pattern) never crashes, and what it writes
//      reads back as the same interval.
import Foundation
import Glibc

/// The scratch domain: one file in a private directory, rewritten for each input.
private let scratch: PreferencesLocation = {
    let base = ProcessInfo.processInfo.environment["FUZZ_SCRATCH"] ?? "/tmp"
    var template = Array("\(base)/securestore-fuzz-prefs-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { fatalError("fuzz set-up: mkdtemp failed in \(base)") }
    let directory = String(cString: made)
    do {
        return try PreferencesLocation(directory: URL(filePath: directory, directoryHint: .isDirectory), domain: "fuzz")
    } catch {
        fatalError("fuzz set-up: \(error)")
    }
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = count == 0 ? [] : Array(UnsafeRawBufferPointer(start: start, count: count))
    checkDocument(bytes)
    if bytes.count >= 8 { checkDate(bytes) }
    return 0
}

/// 6. The date writer: the first eight bytes as the bit pattern of a Date's interval. Formatting never
/// crashes; it either refuses (years outside 0000–9999) or writes text that reads back as the same interval.
func checkDate(_ bytes: [UInt8]) {
    let bits = bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    let date = Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits))
    guard let text = try? ISODate.format(date) else { return }
    // == on the interval: -0.0 and 0.0 are the same moment, written alike.
    guard let back = ISODate.parse(text), back.timeIntervalSinceReferenceDate == date.timeIntervalSinceReferenceDate
    else {
        fatalError("the date \(date.timeIntervalSinceReferenceDate) is written as \(text) but does not read back")
    }
}

func checkDocument(_ bytes: [UInt8]) {
    // 1. The reader itself.
    let direct: Result<[String: PreferenceValue], FormatProblem>
    do throws(FormatProblem) {
        direct = .success(try FormatReader.document(bytes))
    } catch {
        direct = .failure(error)
    }

    // 2. The public entry point, through a real file.
    let path = scratch.filePath
    writeFile(path, bytes)
    let loaded: Result<[String: PreferenceValue], PreferencesError>
    do {
        loaded = .success(try Preferences(location: scratch).storedValues)
    } catch let error as PreferencesError {
        loaded = .failure(error)
    } catch {
        fatalError("Preferences(location:) threw \(type(of: error)), not a PreferencesError")
    }

    switch (direct, loaded) {
    case (.success(let values), .success(let publicValues)):
        guard same(.dictionary(values), .dictionary(publicValues)) else {
            fatalError("Preferences(location:) gives other values than FormatReader.document")
        }
        if !bytes.isEmpty { checkWellFormed(bytes, because: "the reader accepted it") }
        checkRoundTrip(values)
        if let prefs = try? Preferences(location: scratch) {
            let report = prefs.audit()
            _ = report.renderText()
            _ = report.renderJSON()
        }
    case (.failure(let problem), .failure(let error)):
        checkError(problem, error, bytes: bytes, path: path)
    case (.success, .failure(let error)):
        fatalError("the reader accepted the document but Preferences(location:) threw: \(error.message)")
    case (.failure(let problem), .success):
        fatalError("the reader refused the document (\(problem.text)) but Preferences(location:) loaded it")
    }
}

private func checkError(_ problem: FormatProblem, _ error: PreferencesError, bytes: [UInt8], path: String) {
    let expectedCode: PreferencesError.Code = problem.newerVersion ? .unsupportedFormat : .damagedFile
    guard error.code == expectedCode else {
        fatalError("code \(error.code) for \"\(problem.text)\", expected \(expectedCode)")
    }
    guard error.message.hasPrefix(path + " ") else {
        fatalError("the message does not begin with the path: \(error.message)")
    }
    guard error.message.contains(problem.text) else {
        fatalError("the message does not carry the reader's reason: \(error.message)")
    }
    guard !problem.reason.isEmpty else { fatalError("an empty reason") }
    // The tool prints the message as one line on a terminal: a key quoted from the file must not bring
    // a newline or an escape sequence with it.
    if let bad = error.message.unicodeScalars.first(where: {
        // Core's terminal rule: the zero-width joiner and non-joiner move nothing and may stay.
        if $0.value == 0x200C || $0.value == 0x200D { return false }
        return switch $0.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }) {
        fatalError("the message holds the unprintable U+\(String(bad.value, radix: 16, uppercase: true))")
    }
    if let line = problem.line, let column = problem.column {
        let lines = bytes.reduce(1) { $0 + ($1 == 0x0A ? 1 : 0) }
        guard line >= 1, line <= lines, column >= 1, column <= bytes.count + 1 else {
            fatalError("line \(line), column \(column) lies outside the input (\(lines) lines, \(bytes.count) bytes)")
        }
        guard error.message.contains("line \(line), column \(column): ") else {
            fatalError("the message lacks the line and column: \(error.message)")
        }
    } else if bytes.isEmpty {
        guard problem.reason == "the file is empty (0 bytes)" else { fatalError("empty file: \(problem.reason)") }
    } else {
        // No position: the reader claims the document is well-formed JSON with a wrong envelope.
        checkWellFormed(bytes, because: "the reader reported \"\(problem.reason)\" without a position")
    }
}

/// Foundation's parser, as an independent oracle: what our reader accepts as JSON must be JSON.
private func checkWellFormed(_ bytes: [UInt8], because reason: String) {
    var body = bytes[...]
    if body.starts(with: [0xEF, 0xBB, 0xBF]) { body = body.dropFirst(3) }
    do {
        _ = try JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed])
    } catch {
        fatalError("JSONSerialization refuses a document that \(reason): \(error)")
    }
}

private func checkRoundTrip(_ values: [String: PreferenceValue]) {
    let written: [UInt8]
    do {
        written = try FormatWriter.document(values)
    } catch {
        fatalError("the writer refuses values the reader accepted: \(error)")
    }
    let reread: [String: PreferenceValue]
    do throws(FormatProblem) {
        reread = try FormatReader.document(written)
    } catch {
        fatalError("the reader refuses what the writer wrote: \(error.text)\n\(String(decoding: written, as: UTF8.self))")
    }
    guard same(.dictionary(values), .dictionary(reread)) else {
        fatalError("values differ after a write and a read:\n\(String(decoding: written, as: UTF8.self))")
    }
    guard (try? FormatWriter.document(reread)) == written else {
        fatalError("writing the values read back gives other bytes")
    }
    for (key, value) in values {
        do {
            let size = try FormatWriter.compactSize(value)
            let text = try FormatWriter.compact(value)
            guard size == text.utf8.count else {
                fatalError("compactSize says \(size) bytes for \"\(key)\" but the compact text has \(text.utf8.count)")
            }
        } catch {
            fatalError("compactSize or compact throws for a value that was written: \(error)")
        }
    }
}

/// Structural equality that is stricter than `==`: doubles by bit pattern (NaN equals NaN, -0.0 differs
/// from 0.0), strings and keys byte for byte (not by canonical equivalence). Dates by `==` of their
/// intervals: -0.0 and 0.0 are the same moment.
func same(_ a: PreferenceValue, _ b: PreferenceValue) -> Bool {
    switch (a, b) {
    case (.bool(let x), .bool(let y)): return x == y
    case (.int(let x), .int(let y)): return x == y
    case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern
    case (.string(let x), .string(let y)): return x.utf8.elementsEqual(y.utf8)
    case (.data(let x), .data(let y)): return x == y
    case (.date(let x), .date(let y)): return x.timeIntervalSinceReferenceDate == y.timeIntervalSinceReferenceDate
    case (.array(let x), .array(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
    case (.dictionary(let x), .dictionary(let y)):
        guard x.count == y.count else { return false }
        guard Set(x.keys.map { Array($0.utf8) }) == Set(y.keys.map { Array($0.utf8) }) else { return false }
        return x.allSatisfy { key, value in y[key].map { same(value, $0) } ?? false }
    default: return false
    }
}

private func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { fatalError("fuzz set-up: cannot open \(path): errno \(errno)") }
    defer { close(fd) }
    var done = 0
    while done < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, bytes.count - done) }
        guard n > 0 else { fatalError("fuzz set-up: cannot write \(path): errno \(errno)") }
        done += n
    }
}

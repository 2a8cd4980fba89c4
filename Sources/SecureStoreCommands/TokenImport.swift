// `token import --from pass|git-credentials|netrc`: the tokens people keep today, moved into the keyring. Every
// entry is read and checked before the first one is stored (a bad line changes nothing); passwords live only in
// buffers that are zeroed when released, and are never printed, logged or passed in argv or the environment.
// The source is never deleted: the tool says it still exists and how to remove it (Docs/cli.md, "Importing
// tokens").
internal import Foundation
internal import Glibc
internal import Keychain
internal import SecureStore
internal import SecureStoreCore

/// Where `token import` reads tokens.
enum TokenImportSource: String, CaseIterable, Sendable {
    /// A password store of `pass`, decrypted entry by entry with `pass show` (and so gpg and its agent).
    case pass
    /// git's plain-text credential store, `~/.git-credentials`: one `protocol://user:password@host[/path]` a line.
    case gitCredentials = "git-credentials"
    /// `~/.netrc`: `machine HOST login USER password PASS` entries (curl, ftp, git over HTTP).
    case netrc
}

private let tokenSourceOption = Option<TokenImportSource>.oneOf(
    "from", valueName: "SOURCE", help: "pass, git-credentials or netrc (required).", TokenImportSource.allCases)
private let sourcePathArgument = OptionalArgument("PATH", help: "The file or password store to read.", completion: .files)
private let forceFlag = Flag("force", help: "Replace tokens of the same name (they are skipped otherwise).")
private let namePrefixOption = Option<String>(
    "prefix", valueName: "TEXT", help: "Put TEXT before every name (e.g. netrc/).")
private let allLinesFlag = Flag(
    "all-lines", help: "pass: store each whole entry, not only its first line (the password).")
private let dryRunFlag = Flag("dry-run", help: "Read and check the source, say what would be done, store nothing.")

/// The longest credentials file `token import` reads: far more than any real one, small enough to hold at once.
private let maximumSourceSize = 4 << 20

/// `securestore token import`.
let tokenImportCommand = Command(
    name: "import", abstract: "Import tokens from pass, ~/.git-credentials or ~/.netrc.",
    discussion: """
        Names: pass entries keep their pass name (email/work); git-credentials entries are named
        protocol://user@host[/path] (the user as the file writes it, percent-encoded); netrc entries
        user@machine (machine alone without a login; 'default' for the default entry). --prefix goes
        before each. Every entry is read and checked before anything is stored: a bad line changes
        nothing. A name that exists is skipped and reported unless --force. Secrets are never printed.
        The source is never deleted: afterwards the tool says it still exists and how to remove it.
        PATH defaults to ~/.git-credentials, ~/.netrc, or $PASSWORD_STORE_DIR (else ~/.password-store);
        - reads git-credentials or netrc from standard input.
        """,
    arguments: [sourcePathArgument],
    options: [tokenSourceOption, forceFlag, namePrefixOption, allLinesFlag, dryRunFlag],
    rules: [.required(tokenSourceOption, message: "token import needs --from pass, git-credentials or netrc")],
    run: { invocation in
        let source = try invocation.required(tokenSourceOption)
        if invocation[allLinesFlag] && source != .pass {
            throw UsageError("--all-lines is for --from pass", path: invocation.path)
        }
        let environment = ProcessInfo.processInfo.environment
        let home = environment["HOME"] ?? NSHomeDirectory()
        let given = try invocation[sourcePathArgument]
        if given == "-" && source == .pass {
            throw UsageError("--from pass reads a password store directory, not standard input", path: invocation.path)
        }
        let path: String? =
            given == "-" ? nil
            : given ?? {
                switch source {
                case .pass: environment["PASSWORD_STORE_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.password-store"
                case .gitCredentials: home + "/.git-credentials"
                case .netrc: home + "/.netrc"
                }
            }()
        let prefix = try invocation[namePrefixOption] ?? ""

        // 1. Read and check everything: nothing is stored until the whole source is known to be good.
        var found: TokenSourceEntries
        switch source {
        case .pass:
            found = try passEntries(store: path ?? "", allLines: invocation[allLinesFlag])
        case .gitCredentials, .netrc:
            let input = try readWiped(path)
            let name = path.map(UsageError.quoted) ?? "standard input"
            found = try input.withBytes { bytes in
                source == .netrc ? try parseNetrc(bytes, name: name) : try parseGitCredentials(bytes, name: name)
            }
        }
        for index in found.entries.indices {
            found.entries[index].name = prefix + found.entries[index].name
            let name = found.entries[index].name
            guard name.utf8.count <= 256, !name.contains(where: { $0.isNewline || $0 == "\0" }) else {
                throw CLIError(
                    status: ExitStatus.dataError,
                    message: "\(found.entries[index].origin): the name \(UsageError.quoted(String(name.prefix(60))))… "
                        + "is not a token name (at most 256 bytes on one line); nothing was imported")
            }
        }
        for index in found.skipped.indices { found.skipped[index].name = prefix + found.skipped[index].name }

        // 2. Store, one entry after the other; each line says what happened to it.
        let context = try Context(invocation)
        let service = context.paths.tokenService
        var labels: [String: String] = [:]
        for item in try context.keychain.items(service: service) { labels[item.account] = item.label }
        var result = TokensImportedJSON(source: path ?? "-")
        let dryRun = invocation[dryRunFlag]
        let json = invocation.global.json
        func say(_ text: String) { if !json { Console.out(text + "\n") } }
        for entry in found.entries {
            let shown = escapedForTerminal(entry.name)
            if labels[entry.name] != nil, !invocation[forceFlag] {
                result.tokens.append(.init(name: entry.name, outcome: "skipped", reason: "a token of that name exists"))
                say("skipped \(shown): a token of that name exists (--force replaces it)")
                continue
            }
            let replacing = labels[entry.name] != nil
            if !dryRun {
                try context.keychain.set(
                    entry.secret, service: service, account: entry.name,
                    label: labels[entry.name] ?? "\(context.paths.app) token \(entry.name)")
            }
            result.tokens.append(.init(name: entry.name, outcome: replacing ? "replaced" : "imported", reason: nil))
            say((dryRun ? "would " : "") + (replacing ? (dryRun ? "replace " : "replaced ") : (dryRun ? "import " : "imported "))
                + shown + (entry.note.map { " (\($0))" } ?? ""))
        }
        for skipped in found.skipped {
            result.tokens.append(.init(name: skipped.name, outcome: "skipped", reason: skipped.reason))
            say("skipped \(escapedForTerminal(skipped.name)): \(skipped.reason)")
        }
        if json {
            try Console.json(result)
        } else {
            let verb = dryRun ? "would import" : "imported"
            say("\(verb) \(result.imported) token(s)"
                + (result.replaced == 0 ? "" : ", \(dryRun ? "would replace" : "replaced") \(result.replaced)")
                + (result.skipped == 0 ? "" : ", skipped \(result.skipped)")
                + (dryRun ? "; nothing was stored" : ""))
        }
        // 3. The source stays where it was: say so, and how to remove it once the tokens are checked.
        if let path, !dryRun {
            Console.err(sourceStillThereNote(source, path: path, home: home, example: found.entries.first?.name))
        }
        return ExitStatus.success
    })

/// The note after an import: the source still exists, and the command that removes it.
private func sourceStillThereNote(_ source: TokenImportSource, path: String, home: String, example: String?) -> String {
    let shown = shellWord(path)
    switch source {
    case .pass:
        let pass = path == home + "/.password-store" ? "pass" : "PASSWORD_STORE_DIR=\(shown) pass"
        return "securestore: note: the pass store \(shown) still holds these entries; it is never deleted for you. "
            + "Once 'securestore token list' shows them, remove an entry with: \(pass) rm \(shellWord(example ?? "NAME"))"
            + " (or the whole store: rm -r \(shown))\n"
    case .gitCredentials:
        return "securestore: note: \(shown) still holds these passwords in plain text; it is never deleted for you. "
            + "Once 'securestore token list' shows them, remove it with: shred -u \(shown) "
            + "(and take 'store' out of git's credential.helper: git config --global --get-all credential.helper)\n"
    case .netrc:
        return "securestore: note: \(shown) still holds these passwords in plain text; it is never deleted for you. "
            + "curl, ftp and git may read it: once they get their passwords elsewhere, remove it with: shred -u \(shown)\n"
    }
}

/// `text` as one word a shell reads back as it is: bare when it is made of safe characters, else single-quoted;
/// escaped for the terminal either way.
private func shellWord(_ text: String) -> String {
    let safe = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./@%+=:,-".unicodeScalars)
    if !text.isEmpty, text.unicodeScalars.allSatisfy(safe.contains) { return text }
    return escapedForTerminal("'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'")
}

/// `token import --json`, in the one vocabulary (Docs/cli.md, "JSON output"): `imported`, `replaced` and
/// `skipped` are counts; `tokens` says what happened to each entry (`reason` null unless skipped); `source` is the
/// source's path (`-` for standard input). Never a secret.
struct TokensImportedJSON: Encodable {
    struct Entry: Encodable {
        let name: String
        let outcome: String
        let reason: String?

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(name, forKey: .name)
            try container.encode(outcome, forKey: .outcome)
            try container.encode(reason, forKey: .reason)
        }

        private enum CodingKeys: String, CodingKey { case name, outcome, reason }
    }

    let source: String
    var tokens: [Entry] = []
    var imported: Int { tokens.filter { $0.outcome == "imported" }.count }
    var replaced: Int { tokens.filter { $0.outcome == "replaced" }.count }
    var skipped: Int { tokens.filter { $0.outcome == "skipped" }.count }

    init(source: String) { self.source = source }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(source, forKey: .source)
        try container.encode(imported, forKey: .imported)
        try container.encode(replaced, forKey: .replaced)
        try container.encode(skipped, forKey: .skipped)
        try container.encode(tokens, forKey: .tokens)
    }

    private enum CodingKeys: String, CodingKey { case source, imported, replaced, skipped, tokens }
}

// MARK: Entries

/// One token found in a source: its name, its secret, where it came from (for messages), and a note for the
/// person (pass: only the first line was kept).
struct TokenSourceEntry {
    var name: String
    let secret: Secret
    let origin: String
    var note: String? = nil
}

/// What a source holds: the tokens to import, and entries that cannot be (with why).
struct TokenSourceEntries {
    var entries: [TokenSourceEntry] = []
    var skipped: [(name: String, reason: String)] = []
}

/// A mistake in a source, at a line: exit 65, nothing imported. Never shows the line itself (it may hold a password).
private func badLine(_ name: String, _ line: Int, _ message: String) -> CLIError {
    CLIError(status: ExitStatus.dataError, message: "\(name) line \(line): \(message); nothing was imported")
}

// MARK: Reading a plain-text source

/// Bytes of a file or a pipe, in memory of their own that is zeroed when released.
final class WipedBytes {
    private let buffer: UnsafeMutableRawBufferPointer
    private(set) var count = 0

    init(capacity: Int) {
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(capacity, 1), alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        secureZero(buffer)
        buffer.deallocate()
    }

    /// Reads `fd` to its end; false (and nothing kept) when it holds more than the capacity.
    func read(from fd: Int32) throws(Errno) -> Bool {
        while true {
            if count == buffer.count {
                // Full: one more byte says whether there is more.
                var probe: UInt8 = 0
                let n = try withUnsafeMutableBytes(of: &probe) { (byte) throws(Errno) in
                    try FileDescriptor(rawValue: fd).readSome(into: byte)
                }
                if n == 0 { return true }
                probe = 0
                secureZero(buffer)
                count = 0
                return false
            }
            let n = try FileDescriptor(rawValue: fd).readSome(into: UnsafeMutableRawBufferPointer(rebasing: buffer[count...]))
            if n == 0 { return true }
            count += n
        }
    }

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
    }
}

/// The whole of `path` (standard input when nil), at most ``maximumSourceSize`` bytes.
private func readWiped(_ path: String?) throws -> WipedBytes {
    let name = path.map(UsageError.quoted) ?? "standard input"
    var file = FileDescriptor(rawValue: 0)
    if let path {
        do throws(Errno) {
            file = try FileDescriptor.open(path, .readOnly)
        } catch {
            let status =
                error == .noSuchFileOrDirectory ? ExitStatus.notFound : error == .permissionDenied ? ExitStatus.denied : ExitStatus.ioError
            throw CLIError(status: status, message: "cannot read \(name): \(error)")
        }
    }
    defer { if path != nil { file.close() } }
    let fd = file.rawValue
    let input = WipedBytes(capacity: maximumSourceSize)
    do {
        guard try input.read(from: fd) else {
            throw CLIError(
                status: ExitStatus.dataError,
                message: "\(name) is larger than \(maximumSourceSize >> 20) MiB: not a credentials file; nothing was imported")
        }
    } catch let error as Errno {
        throw CLIError(status: ExitStatus.ioError, message: "cannot read \(name): \(error)")
    }
    return input
}

/// The lines of `bytes` (without LF or CRLF), with their numbers from 1.
private func forEachLine(_ bytes: UnsafeRawBufferPointer, _ body: (Int, Range<Int>) throws -> Void) rethrows {
    var start = 0
    var number = 1
    while start < bytes.count {
        var end = start
        while end < bytes.count, bytes[end] != 0x0A { end += 1 }
        var stop = end
        if stop > start, bytes[stop - 1] == 0x0D { stop -= 1 }
        try body(number, start..<stop)
        number += 1
        start = end + 1
    }
}

private func text(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String? {
    String(validating: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
}

private func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }

// MARK: git-credentials

/// `~/.git-credentials` (git-credential-store(1)): one `protocol://user:password@host[:port][/path]` a line,
/// user and password percent-encoded. Blank lines are skipped; any other line that is not such a URL is an error
/// that names its number, never its text.
func parseGitCredentials(_ bytes: UnsafeRawBufferPointer, name source: String) throws -> TokenSourceEntries {
    var found = TokenSourceEntries()
    var names: Set<String> = []
    try forEachLine(bytes) { number, range in
        var start = range.lowerBound
        var end = range.upperBound
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        if start == end { return }
        func find(_ byte: UInt8, in range: Range<Int>, last: Bool = false) -> Int? {
            last ? range.reversed().first { bytes[$0] == byte } : range.first { bytes[$0] == byte }
        }
        guard let colon = find(UInt8(ascii: ":"), in: start..<end), colon > start, colon + 2 < end,
            bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/"),
            (start..<colon).allSatisfy({ bytes[$0] < 0x80 && (isalnum(Int32(bytes[$0])) != 0 || "+.-".utf8.contains(bytes[$0])) })
        else {
            throw badLine(source, number, "not a credential URL (protocol://user:password@host)")
        }
        let authorityStart = colon + 3
        let authorityEnd = find(UInt8(ascii: "/"), in: authorityStart..<end) ?? end
        guard let at = find(UInt8(ascii: "@"), in: authorityStart..<authorityEnd, last: true) else {
            throw badLine(source, number, "no user and password (protocol://user:password@host)")
        }
        guard let separator = find(UInt8(ascii: ":"), in: authorityStart..<at) else {
            throw badLine(source, number, "no password after the user name (protocol://user:password@host)")
        }
        guard at + 1 < authorityEnd else { throw badLine(source, number, "no host after '@'") }
        let passwordRange = (separator + 1)..<at
        guard let length = percentDecodedLength(bytes, passwordRange) else {
            throw badLine(source, number, "the password has a '%' that is not followed by two hexadecimal digits")
        }
        guard length > 0 else { throw badLine(source, number, "the password is empty") }
        guard let scheme = text(bytes, start..<colon), let user = text(bytes, authorityStart..<separator),
            let host = text(bytes, (at + 1)..<authorityEnd), let path = text(bytes, authorityEnd..<end)
        else { throw badLine(source, number, "not UTF-8 text") }
        let name = "\(scheme)://" + (user.isEmpty ? "" : "\(user)@") + host + (path == "/" ? "" : path)
        let secret = Secret(count: length) { out in percentDecode(bytes, passwordRange, into: out) }
        if names.insert(name).inserted {
            found.entries.append(TokenSourceEntry(name: name, secret: secret, origin: "\(source) line \(number)"))
        } else {
            // git uses the first line that matches.
            found.skipped.append((name, "again at line \(number); the first is kept, as git uses it"))
        }
    }
    return found
}

/// The length of `bytes[range]` once `%XX` escapes are decoded, or nil for a bad escape.
private func percentDecodedLength(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Int? {
    var index = range.lowerBound
    var length = 0
    while index < range.upperBound {
        if bytes[index] == UInt8(ascii: "%") {
            guard index + 2 < range.upperBound, hexValue(bytes[index + 1]) != nil, hexValue(bytes[index + 2]) != nil
            else { return nil }
            index += 3
        } else {
            index += 1
        }
        length += 1
    }
    return length
}

/// Writes `bytes[range]` with its `%XX` escapes decoded into `out` (sized by ``percentDecodedLength(_:_:)``).
private func percentDecode(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, into out: UnsafeMutableRawBufferPointer) {
    var index = range.lowerBound
    var written = 0
    while index < range.upperBound {
        if bytes[index] == UInt8(ascii: "%"), let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) {
            out[written] = high << 4 | low
            index += 3
        } else {
            out[written] = bytes[index]
            index += 1
        }
        written += 1
    }
}

// MARK: netrc

/// `~/.netrc` (netrc(5), as curl reads it): words separated by white space, `machine NAME` or `default` starting
/// an entry, then `login`, `password` and `account` with their values; a value may be "quoted" (with `\"` and
/// `\\` inside); `macdef NAME` and the lines up to the next blank one are skipped; `#` starts a comment where a
/// keyword is expected. Anything else is an error naming its line, never the word (it may be a password).
func parseNetrc(_ bytes: UnsafeRawBufferPointer, name source: String) throws -> TokenSourceEntries {
    struct Word {
        let range: Range<Int>
        let quoted: Bool
        let line: Int
    }
    var index = 0
    var line = 1
    /// The next word, or nil at the end.
    func nextWord() throws -> Word? {
        while index < bytes.count, isSpace(bytes[index]) {
            if bytes[index] == 0x0A { line += 1 }
            index += 1
        }
        guard index < bytes.count else { return nil }
        let wordLine = line
        if bytes[index] == UInt8(ascii: "\"") {
            let start = index + 1
            index = start
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                if bytes[index] == 0x0A { line += 1 }
                index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
            }
            guard index < bytes.count else { throw badLine(source, wordLine, "a quoted value is not closed with '\"'") }
            index += 1
            return Word(range: start..<(index - 1), quoted: true, line: wordLine)
        }
        let start = index
        while index < bytes.count, !isSpace(bytes[index]) { index += 1 }
        return Word(range: start..<index, quoted: false, line: wordLine)
    }
    /// The bytes of a word, its quotes' escapes decoded, written into `out`; their count when `out` is nil.
    func decode(_ word: Word, into out: UnsafeMutableRawBufferPointer?) -> Int {
        var i = word.range.lowerBound
        var n = 0
        while i < word.range.upperBound {
            if word.quoted, bytes[i] == UInt8(ascii: "\\"), i + 1 < word.range.upperBound { i += 1 }
            out?[n] = bytes[i]
            n += 1
            i += 1
        }
        return n
    }
    func string(_ word: Word) throws -> String {
        let count = decode(word, into: nil)
        var storage = [UInt8](repeating: 0, count: count)
        storage.withUnsafeMutableBytes { _ = decode(word, into: $0) }
        guard let value = String(validating: storage, as: UTF8.self) else {
            throw badLine(source, word.line, "not UTF-8 text")
        }
        return value
    }
    func isKeyword(_ word: Word, _ keyword: String) -> Bool {
        !word.quoted && word.range.count == keyword.utf8.count && zip(word.range, keyword.utf8).allSatisfy { bytes[$0] == $1 }
    }

    struct Entry {
        var machine: String?  // nil: default
        var login: String?
        var password: Word?
        let line: Int
    }
    var entries: [Entry] = []
    while let word = try nextWord() {
        if !word.quoted, bytes[word.range.lowerBound] == UInt8(ascii: "#") {
            while index < bytes.count, bytes[index] != 0x0A { index += 1 }
            continue
        }
        func value(_ keyword: String) throws -> Word {
            guard let value = try nextWord() else { throw badLine(source, word.line, "'\(keyword)' has no value") }
            return value
        }
        if isKeyword(word, "machine") {
            entries.append(Entry(machine: try string(try value("machine")), line: word.line))
        } else if isKeyword(word, "default") {
            entries.append(Entry(machine: nil, line: word.line))
        } else if isKeyword(word, "macdef") {
            _ = try value("macdef")
            // The macro runs to the next blank line.
            while index < bytes.count {
                if bytes[index] == 0x0A {
                    line += 1
                    if index + 1 < bytes.count, bytes[index + 1] == 0x0A {
                        index += 1
                        break
                    }
                }
                index += 1
            }
        } else if let keyword = ["login", "password", "account"].first(where: { isKeyword(word, $0) }) {
            guard !entries.isEmpty else {
                throw badLine(source, word.line, "'\(keyword)' comes before any 'machine' or 'default'")
            }
            let given = try value(keyword)
            switch keyword {
            case "login": entries[entries.count - 1].login = try string(given)
            case "password": entries[entries.count - 1].password = given
            default: break  // account: a second secret of some FTP servers, not a token of ours
            }
        } else {
            throw badLine(
                source, word.line,
                "a word that is not a netrc keyword (machine, default, login, password, account, macdef); "
                    + "it is not shown, as it may be a password (a password with spaces must be \"quoted\")")
        }
    }
    var found = TokenSourceEntries()
    var names: Set<String> = []
    for entry in entries {
        let host = entry.machine ?? "default"
        let name = entry.login.map { "\($0)@\(host)" } ?? host
        guard let password = entry.password else {
            found.skipped.append((name, "no password (line \(entry.line))"))
            continue
        }
        guard names.insert(name).inserted else {
            found.skipped.append((name, "again at line \(entry.line); the first is kept, as curl uses it"))
            continue
        }
        let secret = Secret(count: decode(password, into: nil)) { _ = decode(password, into: $0) }
        guard !secret.isEmpty else {
            found.skipped.append((name, "an empty password (line \(entry.line))"))
            continue
        }
        found.entries.append(TokenSourceEntry(name: name, secret: secret, origin: "\(source) line \(entry.line)"))
    }
    return found
}

// MARK: pass

/// Every entry of the password store at `store`, decrypted with `pass show` (gpg and the person's agent): the
/// first line of each (the password, what `pass -c` copies) or, with `allLines`, the whole entry less one final
/// line break.
private func passEntries(store: String, allLines: Bool) throws -> TokenSourceEntries {
    guard (try? fileStatus(store))?.isDirectory == true else {
        throw CLIError(
            status: ExitStatus.notFound, message: "no password store at \(UsageError.quoted(store))",
            hint: "give its directory, or set PASSWORD_STORE_DIR")
    }
    // Every `*.gpg` below the store, hidden files and folders (.git, .gpg-id) left out, links to folders not followed.
    var names: [String] = []
    func walk(_ relative: String) {
        for name in (try? listDirectory(relative.isEmpty ? store : store + "/" + relative)) ?? [] where !name.hasPrefix(".") {
            let child = relative.isEmpty ? name : relative + "/" + name
            guard let status = try? fileStatus(store + "/" + child, followingLinks: false) else { continue }
            if status.isDirectory {
                walk(child)
            } else if name.hasSuffix(".gpg") {
                names.append(String(child.dropLast(4)))
            }
        }
    }
    walk("")
    names.sort()
    var found = TokenSourceEntries()
    for name in names {
        let output = try passShow(name, store: store)
        var note: String? = nil
        let secret: Secret? = output.withBytes { bytes in
            var end = bytes.firstIndex(of: 0x0A) ?? bytes.count
            if allLines {
                end = bytes.count
                if end > 0, bytes[end - 1] == 0x0A { end -= 1 }
            } else if end + 1 < bytes.count {
                note = "its first line only; --all-lines keeps the others"
            }
            if !allLines, end > 0, bytes[end - 1] == 0x0D { end -= 1 }
            guard end > 0 else { return nil }
            return Secret(count: end) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0..<end])) }
        }
        guard let secret else {
            found.skipped.append((name, allLines ? "the entry is empty" : "the first line (the password) is empty"))
            continue
        }
        found.entries.append(TokenSourceEntry(name: name, secret: secret, origin: "pass entry \(UsageError.quoted(name))", note: note))
    }
    return found
}

/// What `pass show NAME` prints, read from a pipe into wiped memory. The child gets the tool's environment plus
/// PASSWORD_STORE_DIR (never a secret), /dev/null as standard input; what it says on standard error (gpg's
/// reasons) is kept for the message.
private func passShow(_ name: String, store: String) throws -> WipedBytes {
    // Both pipes close-on-exec: not inherited by pass (dup2 onto 1 and 2 makes the descriptors it needs).
    let output: (readEnd: FileDescriptor, writeEnd: FileDescriptor)
    let errors: (readEnd: FileDescriptor, writeEnd: FileDescriptor)
    do throws(Errno) {
        output = try FileDescriptor.pipe()
        do throws(Errno) {
            errors = try FileDescriptor.pipe()
        } catch {
            output.readEnd.close()
            output.writeEnd.close()
            throw error
        }
    } catch {
        throw CLIError(status: ExitStatus.ioError, message: "cannot make a pipe: \(error)")
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, output.writeEnd.rawValue, 1)
    posix_spawn_file_actions_adddup2(&actions, errors.writeEnd.rawValue, 2)
    var environment = ProcessInfo.processInfo.environment
    environment["PASSWORD_STORE_DIR"] = store
    let arguments = ["pass", "show", name]
    let argv = arguments.map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        for pointer in argv + envp { free(pointer) }
    }
    var pid: pid_t = 0
    let spawned = posix_spawnp(&pid, "pass", &actions, nil, argv, envp)
    output.writeEnd.close()
    errors.writeEnd.close()
    guard spawned == 0 else {
        output.readEnd.close()
        errors.readEnd.close()
        if spawned == ENOENT {
            throw CLIError(
                status: ExitStatus.unavailable, message: "the 'pass' command is not installed; nothing was imported",
                hint: "on Debian: apt-get install pass")
        }
        throw CLIError(status: ExitStatus.unavailable, message: "cannot run pass: \(Errno(rawValue: spawned)); nothing was imported")
    }
    // Standard error is drained by a thread of its own so that neither pipe can fill up and block pass.
    let messages = StderrCollector(errors.readEnd)
    let secret = WipedBytes(capacity: Keychain.maximumSecretSize)
    let fits: Bool
    do {
        fits = try secret.read(from: output.readEnd.rawValue)
    } catch {
        fits = false
    }
    // Drained (and wiped) so that pass can finish writing and exit.
    if !fits { output.readEnd.drain() }
    output.readEnd.close()
    var status: Int32 = 0
    _ = try? retryingInterrupts { waitpid(pid, &status, 0) }
    let said = messages.finish()
    let exited = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    guard exited == 0 else {
        let reason = said.split(whereSeparator: \.isNewline).last.map { ": " + escapedForTerminal(String($0), limit: 200) } ?? ""
        throw CLIError(
            status: ExitStatus.dataError,
            message: "pass could not show \(UsageError.quoted(name)) (exit \(exited))\(reason); nothing was imported",
            hint: "check that 'pass show NAME' works here (gpg's key and agent)")
    }
    guard fits else {
        throw CLIError(
            status: ExitStatus.dataError,
            message: "the pass entry \(UsageError.quoted(name)) is larger than a token may be "
                + "(\(Keychain.maximumSecretSize / 1024) KiB); nothing was imported")
    }
    return secret
}

/// Reads a descriptor to its end on a thread of its own (gpg's messages: never a secret), at most 64 KiB.
private final class StderrCollector: @unchecked Sendable {
    // @unchecked: `text` is written by the reading thread only before `done` is signalled, read only after.
    private var text: [UInt8] = []
    private let done = DispatchSemaphore(value: 0)

    init(_ descriptor: FileDescriptor) {
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = buffer.withUnsafeMutableBytes { (try? descriptor.readSome(into: $0)) ?? 0 }
                if n <= 0 { break }
                if text.count < 65_536 { text += buffer[0..<n] }
            }
            descriptor.close()
            done.signal()
        }
    }

    func finish() -> String {
        done.wait()
        return String(decoding: text, as: UTF8.self)
    }
}

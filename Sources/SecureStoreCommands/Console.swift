internal import EncryptedDatabase
internal import Foundation
internal import Glibc
internal import Keychain
internal import Preferences
internal import SecureStore
internal import SecureStoreCore
internal import Sync

/// Exit statuses, sysexits-style (Docs/cli.md lists them).
enum ExitStatus {
    static let success: Int32 = 0
    /// A check found a problem: the audit flagged a secret or a hard limit, verify failed.
    static let checkFailed: Int32 = 1
    /// A question (`tasks clear-done` on a terminal) was answered no: nothing was changed.
    static let declined: Int32 = 1
    static let usage: Int32 = 64
    static let dataError: Int32 = 65
    static let notFound: Int32 = 66
    static let unavailable: Int32 = 69
    static let software: Int32 = 70
    static let cannotCreate: Int32 = 73
    static let ioError: Int32 = 74
    static let temporaryFailure: Int32 = 75
    static let denied: Int32 = 77

    /// Every status with what it means, in order: the man page's EXIT STATUS section is written from it.
    static let meanings: [(status: Int32, meaning: String)] = [
        (success, "Success."),
        (checkFailed, "A check found a problem: prefs audit found a secret or a hard limit exceeded, db verify failed, a backup did not verify; or a question was answered no (nothing was changed)."),
        (usage, "Usage error: unknown command or option, missing or extra argument, bad value, ambiguous task ID prefix, a bulk change off a terminal without --yes."),
        (dataError, "Bad data: a value over its limit, a damaged preferences file, a wrong key or a damaged database, a copied database, keystore move found items whose values differ in the two stores (both kept)."),
        (notFound, "Not found: no such token, task, preference or database (commands other than the creating ones create nothing)."),
        (unavailable, "Service unavailable: no D-Bus session bus or no Secret Service provider."),
        (software, "Internal error: a bug, please report it."),
        (cannotCreate, "Cannot create: a backup or import target exists."),
        (ioError, "I/O error: disk full, I/O failure, a data directory that is not a directory."),
        (temporaryFailure, "Temporary failure: the keyring timed out or the database stayed busy; try again."),
        (denied, "Denied: the keyring or item is locked, an approval is needed and no prompt may be shown, a prompt was dismissed, permission denied."),
    ]
}

/// An error of the tool itself, with its exit status and an optional hint.
struct CLIError: Error {
    let status: Int32
    let message: String
    var hint: String? = nil
}

enum Console {
    /// Writes `text` to standard output (see ``write(_:)``).
    static func out(_ text: String) {
        var text = text
        text.withUTF8 { write(UnsafeRawBufferPointer($0)) }
    }

    /// Writes `text` to standard error; a closed or failing standard error is ignored (there is nowhere left to
    /// say anything).
    static func err(_ text: String) {
        var text = text
        text.withUTF8 { _ = writeAll(2, UnsafeRawBufferPointer($0)) }
    }

    /// Writes all of `bytes` to standard output: every byte the tool prints goes through here (or through
    /// ``writeAll(_:_:)`` for a stream that reports its own errors), never through `FileHandle`, whose `write`
    /// traps on an error.
    ///
    /// When the reader has gone (`EPIPE`: `securestore tasks list | head -1`), the process ends at once and
    /// quietly, as if by `SIGPIPE`, as coreutils and git do: no message, and exit status 141 in the shell.
    /// Whatever was in progress is left as a crash leaves it: an open transaction is never committed, and a
    /// temporary file is removed by the next command. Any other error (a full disk under a redirected output)
    /// ends it with a one-line message and status 74.
    static func write(_ bytes: UnsafeRawBufferPointer) {
        guard let failure = writeAll(1, bytes) else { return }
        if failure == .brokenPipe { endAsIfByBrokenPipe() }
        err("securestore: cannot write standard output: \(failure)\n")
        exit(ExitStatus.ioError)
    }

    /// Writes all of `bytes` to `fd` (Core's loop over interrupted and partial writes); the error, if it failed.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Errno? {
        do {
            try FileDescriptor(rawValue: fd).writeAll(bytes)
            return nil
        } catch {
            return error
        }
    }

    /// Ends the process as `SIGPIPE` would have, had the tool not ignored it: the shell sees status 141.
    static func endAsIfByBrokenPipe() -> Never {
        signal(SIGPIPE, SIG_DFL)
        raise(SIGPIPE)
        _exit(128 + SIGPIPE)
    }

    /// Whether standard output is a pipe whose reader has gone: its write end polls as an error.
    static var stdoutReaderIsGone: Bool {
        var descriptor = pollfd(fd: 1, events: Int16(POLLOUT), revents: 0)
        return poll(&descriptor, 1, 0) == 1 && descriptor.revents & Int16(POLLERR) != 0
    }

    static var stdoutIsTerminal: Bool { isatty(1) == 1 }
    static var stdinIsTerminal: Bool { isatty(0) == 1 }
    static var stderrIsTerminal: Bool { isatty(2) == 1 }

    /// The one encoder of `--json` output: sorted keys, slashes as they are.
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// Prints `value` as one line of JSON (JSONOutput.swift has the types).
    static func json(_ value: some Encodable) throws {
        var data = try encoder.encode(value)
        data.append(0x0a)
        data.withUnsafeBytes { write($0) }
    }

    /// Progress for long work: shown on a terminal, silent when stderr is piped.
    static func progress(_ label: String, done: Int, total: Int) {
        guard stderrIsTerminal, total > 0 else { return }
        let percent = min(100, done * 100 / total)
        err("\r\(label): \(percent)%" + (done >= total ? "\n" : ""))
    }
}

/// Turns any error into one line on standard error and an exit status. Messages of the modules never
/// contain secrets, keys or SQL arguments; this function adds none.
func report(_ error: any Error, parser: Parser) -> Int32 {
    // A stream (export, a listing) stopped because its reader went away: end as the write would have, quietly.
    if Console.stdoutReaderIsGone { Console.endAsIfByBrokenPipe() }
    let (status, message, hint) = describe(error)
    var line = "securestore: \(message)"
    if let hint { line += " (hint: \(hint))" }
    Console.err(line + "\n")
    if let usage = error as? UsageError {
        Console.err(parser.usage(usage.path) + "\n")
        Console.err("See 'securestore \((usage.path + ["--help"]).joined(separator: " "))'.\n")
    }
    return status
}

private func describe(_ error: any Error) -> (Int32, String, String?) {
    switch error {
    case let error as UsageError:
        return (ExitStatus.usage, error.message, nil)
    case let error as CLIError:
        return (error.status, error.message, error.hint)
    case let error as KeychainError:
        let status: Int32
        switch error.code {
        case KeychainError.Code.noSessionBus, KeychainError.Code.serviceUnavailable, KeychainError.Code.collectionNotFound:
            status = ExitStatus.unavailable
        case KeychainError.Code.locked, KeychainError.Code.itemLocked, KeychainError.Code.attributesHidden,
            KeychainError.Code.approvalRequired, KeychainError.Code.promptDismissed:
            status = ExitStatus.denied
        case KeychainError.Code.timedOut: status = ExitStatus.temporaryFailure
        case KeychainError.Code.secretTooLarge, KeychainError.Code.invalidName, KeychainError.Code.invalidSecret,
            KeychainError.Code.damagedStore:
            status = ExitStatus.dataError
        case KeychainError.Code.wrongPassphrase, KeychainError.Code.readOnlyStore, KeychainError.Code.unsafePermissions:
            status = ExitStatus.denied
        case KeychainError.Code.storeFull: status = ExitStatus.ioError
        default: status = ExitStatus.unavailable
        }
        // The library's message names its own setting; the tool's is the environment variable.
        let hint: String? =
            error.code == KeychainError.Code.timedOut
            ? "SECURESTORE_TIMEOUT=SECONDS makes the tool wait longer for the keyring (default 5)"
            : error.code == KeychainError.Code.noSessionBus || error.code == KeychainError.Code.serviceUnavailable
                ? "without a Secret Service, keep keys in an encrypted key file: --keystore file (Docs/keystores.md)" : nil
        return (status, error.message, hint)
    case let error as DatabaseError:
        let status: Int32
        switch error.code {
        case .busy: status = ExitStatus.temporaryFailure
        case .readOnly, .permissionDenied: status = ExitStatus.denied
        case .notFound: status = ExitStatus.notFound
        case .diskFull, .io: status = ExitStatus.ioError
        case .sqlcipherUnavailable: status = ExitStatus.unavailable
        case .misuse: status = ExitStatus.software
        default: status = ExitStatus.dataError
        }
        return (status, error.message, nil)
    case let error as PreferencesError:
        let status: Int32
        switch error.code {
        case .permissionDenied: status = ExitStatus.denied
        case .io: status = ExitStatus.ioError
        default: status = ExitStatus.dataError
        }
        var hint: String? = nil
        if error.code == .damagedFile { hint = "'securestore prefs reset' moves the damaged file aside and starts fresh" }
        return (status, error.message, hint)
    case let error as SecureStoreError:
        let status: Int32
        let hint = advice(for: error)
        switch error.code {
        case SecureStoreError.Code.invalidArgument, SecureStoreError.Code.ambiguous: status = ExitStatus.usage
        case SecureStoreError.Code.notFound, SecureStoreError.Code.missingKey: status = ExitStatus.notFound
        // A failed check is exit 1 only for the check commands (db verify, db backup), which map it themselves.
        case SecureStoreError.Code.verificationFailed, SecureStoreError.Code.invalidData: status = ExitStatus.dataError
        case SecureStoreError.Code.alreadyExists: status = ExitStatus.cannotCreate
        case SecureStoreError.Code.inUse: status = ExitStatus.temporaryFailure
        case SecureStoreError.Code.fileSystem: status = ExitStatus.ioError
        case SecureStoreError.Code.approvalPending: status = ExitStatus.denied
        default: status = ExitStatus.dataError
        }
        return (status, error.message, hint)
    case let error as SyncError:
        // Every command that syncs, and every other that meets sync (a backup fetching lazily synced attachments).
        switch error.code {
        case SyncError.Code.invalidArgument: return (ExitStatus.usage, error.message, nil)
        case SyncError.Code.notEnabled:
            return (ExitStatus.notFound, error.message,
                    "'securestore sync init --git URL' (or --folder PATH) sets it up; 'securestore sync join' joins a group")
        case SyncError.Code.missingKey:
            return (ExitStatus.notFound, error.message,
                    "the sync key belongs to the database's id: a restored or copied database has another one (Docs/sync.md)")
        case SyncError.Code.notFound: return (ExitStatus.notFound, error.message, nil)
        case SyncError.Code.alreadyEnabled: return (ExitStatus.cannotCreate, error.message, nil)
        case SyncError.Code.keyRotated:
            return (ExitStatus.denied, error.message,
                    "if this device stays in the group: 'securestore sync rekey' with the pairing code that "
                        + "'sync remove-device' printed on the other device")
        case SyncError.Code.remote: return (ExitStatus.unavailable, error.message, nil)
        default: return (ExitStatus.dataError, error.message, nil)
        }
    default:
        return (ExitStatus.software, "unexpected error: \(type(of: error))", nil)
    }
}

/// Reads a secret from standard input without echo on a terminal, or all of standard input when it
/// is piped. One trailing newline is removed unless `raw`. The bytes go straight into a ``Secret``;
/// the read buffer is wiped.
func readSecret(prompt: String, raw: Bool) throws -> Secret {
    let limit = Keychain.maximumSecretSize
    let capacity = limit + 3
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
    buffer.initializeMemory(as: UInt8.self, repeating: 0)
    defer {
        secureZero(buffer)
        buffer.deallocate()
    }
    var count = 0
    if Console.stdinIsTerminal {
        var saved = termios()
        tcgetattr(0, &saved)
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(0, TCSAFLUSH, &silent)
        defer {
            tcsetattr(0, TCSAFLUSH, &saved)
            Console.err("\n")
        }
        Console.err(prompt)
        // One line, without echo.
        while count < capacity {
            let n = (try? FileDescriptor(rawValue: 0).readSome(into: UnsafeMutableRawBufferPointer(rebasing: buffer[count..<(count + 1)]))) ?? -1
            if n <= 0 || buffer[count] == UInt8(ascii: "\n") { break }
            count += 1
        }
    } else {
        while count < capacity {
            let n = (try? FileDescriptor(rawValue: 0).readSome(into: UnsafeMutableRawBufferPointer(rebasing: buffer[count..<capacity]))) ?? -1
            if n <= 0 { break }
            count += n
        }
    }
    if !raw && count > 0 && buffer[count - 1] == UInt8(ascii: "\n") {
        count -= 1
        if count > 0 && buffer[count - 1] == UInt8(ascii: "\r") { count -= 1 }
    }
    if count > limit {
        throw CLIError(
            status: ExitStatus.dataError,
            message: "the secret is more than \(limit) bytes; the limit is \(limit) bytes (64 KiB)")
    }
    guard count > 0 else {
        throw CLIError(
            status: ExitStatus.dataError, message: "no secret given on standard input",
            hint: "pipe it in: `printf %s \"$TOKEN\" | securestore token set NAME`, or run on a terminal to be prompted")
    }
    return Secret(bytes: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
}

/// What the tool tells a person to do about a library error: the library states facts and codes, the tool names
/// its own commands.
func advice(for error: SecureStoreError) -> String? {
    let name = error.databaseName ?? "NAME"
    switch error.code {
    case SecureStoreError.Code.missingKey, SecureStoreError.Code.keyMismatch:
        return "if you kept a recovery code, run `securestore db recover --name \(name)`"
    case SecureStoreError.Code.copiedDatabase:
        return error.path.map { "`securestore db restore \(UsageError.quoted($0))` installs the copy as a database of its own" }
    case SecureStoreError.Code.approvalPending:
        return "run a securestore command on a terminal (or with SECURESTORE_PROMPT=always) and approve the "
            + "keyring's access request; then rotate again if you were rotating"
    default:
        return nil
    }
}

// A key store for machines without a Secret Service (servers, SSH sessions, CI, containers): one file, sealed with
// AES-256-GCM under a key derived from a passphrase with scrypt (both from libcrypto, which SQLCipher links), its
// unsealed key cached in the kernel keyring for a while like gpg-agent's, with no daemon of ours.
internal import CLibCrypto
internal import CLinuxKeyring
internal import Foundation
internal import SecureStoreCore
internal import Synchronization
internal import Glibc

/// Where the key file gets its passphrase: asked on the terminal without echo, read from a file descriptor (for
/// scripts), or given by the program. Never from argv or the environment.
public struct Passphrase: Sendable {
    enum Source: Sendable {
        case terminal
        case fileDescriptor(Int32)
        case provider(@Sendable (_ creating: Bool) throws -> Secret)
        case unavailable
    }
    let source: Source

    /// Never asked: the store opens only with the key the session cache holds, else it is locked at once
    /// (``KeychainError/Code/locked``). For callers that may not prompt (shell completion, a service).
    public static let none = Passphrase(source: .unavailable)

    /// Asked on the controlling terminal (`/dev/tty`) without echo; twice when the file is created. Without a
    /// terminal the store stays locked (``KeychainError/Code/locked``) unless the session cache holds its key.
    public static let terminal = Passphrase(source: .terminal)

    /// Read from the open file descriptor `fd`, up to its first newline or its end (for scripts:
    /// `--passphrase-fd 3 3<file`). It is read once per process.
    public static func fileDescriptor(_ fd: Int32) -> Passphrase { Passphrase(source: .fileDescriptor(fd)) }

    /// Given by the program; `creating` is true when the file is being made (ask twice, say so).
    public static func provider(_ body: @escaping @Sendable (_ creating: Bool) throws -> Secret) -> Passphrase {
        Passphrase(source: .provider(body))
    }
}

/// An encrypted key file: the items a ``Keychain`` stores (service, account, label, secret), kept in one file
/// sealed with AES-256-GCM under a key derived from a passphrase with scrypt. For machines with no Secret Service;
/// use it through `Keychain(configuration: .init(store: .keyFile(file)))`.
///
/// ```swift
/// let file = KeyFile(passphrase: .fileDescriptor(3))
/// let keychain = Keychain(configuration: Keychain.Configuration(store: .keyFile(file)))
/// try keychain.set("ghp_…", service: "github.com", account: "me")
/// ```
///
/// - The file (default `$XDG_DATA_HOME/securestore/keys.sealed`, mode 0600 in a 0700 folder) is rewritten
///   whole on every change: a temporary file, fsynced, renamed over it, the folder fsynced. Writers hold an
///   exclusive `flock` on `<file>.lock`, so two processes adding items at once lose neither.
/// - scrypt with N = 2^17, r = 8, p = 1 (128 MiB of memory; files made under N = 2^15 are read as they are); the
///   key it gives opens the file, a check value in the header tells a wrong passphrase, and a header checksum tells
///   a damaged header before any key is derived. Header and parameters are authenticated with the items.
/// - Once unlocked, the derived key is kept in the kernel keyring (keyrings(7)) of the login session, for
///   ``sessionCacheTimeout`` after each use and never longer than ``sessionCacheMaximum`` (as gpg-agent's
///   `default-cache-ttl` and `max-cache-ttl`): readable by this user's processes in that session and by root, never by
///   another user, not even one `su` or `sudo` started from the session. Where there is no login session keyring (a
///   container, a CI step, cron) nothing is cached unless ``sessionCacheScope`` is ``SessionCacheScope/user``. A shell
///   session types the passphrase once; ``lock()`` drops it.
/// - A file that is truncated, damaged, too large, not a regular file, a symbolic link, or from a newer version is
///   refused and left as it is.
public final class KeyFile: Sendable {
    /// The file.
    public let path: String
    /// How the passphrase is obtained.
    public let passphrase: Passphrase
    /// How long the unsealed key stays in the kernel keyring after an unlock: 10 minutes by default; nil neither
    /// reads nor writes the kernel keyring (the key stays in this process only).
    public let sessionCacheTimeout: Duration?
    /// The longest the unsealed key stays cached however often it is used: 2 hours by default.
    public let sessionCacheMaximum: Duration
    /// Where the cache may live: only in a login session keyring (the default), or also in the user's.
    public let sessionCacheScope: SessionCacheScope

    /// Where the unsealed key may be cached in the kernel keyring.
    public enum SessionCacheScope: Sendable {
        /// Only in the login session's keyring (pam_keyinit gives one to SSH and console logins, runc to each
        /// container): shared by the processes of that login only. Without one, nothing is cached.
        case loginSession
        /// Also, where the process has no login session keyring, in the user's session keyring: shared by every
        /// process of this uid in its user namespace — other containers and CI jobs of the same uid included.
        case user
    }

    /// Why the unlocked key cannot be cached at all, or nil when it can: the kernel keyring is unavailable to this
    /// process (`keyctl` refused: a container's seccomp filter, a kernel without keys).
    public var sessionCacheUnavailableReason: String? { SessionCache.unavailableReason }

    /// Whether a key unlocked now would be cached, and where: "the login session keyring", "the user keyring of
    /// uid N (asked for)", or nil when it would not be (no timeout, or no login session keyring).
    public var sessionCacheLocation: String? {
        guard sessionCacheTimeout != nil else { return nil }
        if SessionCache.loginSessionKeyring != nil { return "the login session keyring" }
        guard SessionCache.keyring(sessionCacheScope) != nil else { return nil }
        return "the user session keyring of uid \(getuid()) (SECURESTORE_CACHE=user: every process of that uid can read it)"
    }

    /// The largest key file accepted: 16 MiB (a few thousand tokens and keys take a few hundred KiB).
    public static let maximumSize = 16 << 20

    /// scrypt's cost parameters: the ones a file was sealed with are in its header.
    struct KDFParameters: Equatable {
        var log2N: UInt8
        var r: UInt32
        var p: UInt32
        /// Whether the whole passphrase input counts (one trailing newline dropped): header byte 11 = 1. Files sealed
        /// before (0) took only its first line, at most 4096 bytes; they keep that rule until a new passphrase.
        var wholeInput = true

        /// For new files and new passphrases: N = 2^17, r = 8, p = 1 (OWASP's scrypt minimum; 128 MiB of memory).
        /// Files sealed under N = 2^15 (before) are read as they are; `keystore passphrase` seals them under these.
        static let current = KDFParameters(log2N: 17, r: 8, p: 1, wholeInput: true)

        /// The memory scrypt needs: 128 · r · N · p bytes, plus its scratch.
        var memory: UInt64 { 128 * UInt64(r) * (UInt64(1) << UInt64(log2N)) * UInt64(p) }

        /// What a file may ask for: N 2^10…2^20, r 1…16, p 1…4, and at most 1 GiB of memory (so that the limit
        /// passed to libcrypto lets every accepted file open).
        var isAccepted: Bool {
            (10...20).contains(log2N) && (1...16).contains(r) && (1...4).contains(p) && memory <= 1 << 30
        }
    }

    /// The unsealed key and the salt it belongs to, once this process has it.
    private let unlocked = Mutex<(salt: [UInt8], key: SecureBytes, parameters: KDFParameters)?>(nil)
    /// A passphrase read from a file descriptor, kept for this process (a pipe can be read only once).
    private let readPassphrase = Mutex<SecureBytes?>(nil)

    /// Called once, just before the file is made (before its new passphrase is asked): a tool says there which store
    /// it chose.
    let willCreate: (@Sendable (_ path: String) -> Void)?

    /// A key file at `path` whose passphrase comes from `passphrase`; `willCreate` is called just before the file is
    /// made.
    public init(
        path: String = KeyFile.defaultPath(), passphrase: Passphrase, sessionCacheTimeout: Duration? = .seconds(600),
        sessionCacheMaximum: Duration = .seconds(7200), sessionCacheScope: SessionCacheScope = .loginSession,
        willCreate: (@Sendable (_ path: String) -> Void)? = nil
    ) {
        self.path = path
        self.passphrase = passphrase
        self.sessionCacheTimeout = sessionCacheTimeout
        self.sessionCacheMaximum = sessionCacheMaximum
        self.sessionCacheScope = sessionCacheScope
        self.willCreate = willCreate
    }

    /// `$XDG_DATA_HOME/securestore/keys.sealed` (`~/.local/share/securestore/keys.sealed`).
    public static func defaultPath() -> String {
        let environment = ProcessInfo.processInfo.environment
        let data = environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.local/share")
        return data + "/securestore/keys.sealed"
    }

    /// Whether the file exists.
    public var exists: Bool { fileExists(path) }

    /// Forgets the unsealed key: in this process and in the kernel's session keyring. The next access asks for
    /// the passphrase again. Returns whether the session keyring held it.
    @discardableResult
    public func lock() -> Bool {
        unlocked.withLock { $0 = nil }
        readPassphrase.withLock { $0 = nil }
        guard let header = try? readFile().flatMap({ try Sealed.parse($0, path: path).header }) else { return false }
        return SessionCache.drop(description: Self.cacheDescription(salt: header.salt))
    }

    /// Changes the passphrase: the file is sealed again under a new salt and the key `new` gives, written whole
    /// and renamed over the old one (a crash leaves the old file or the new one, each opening with its own
    /// passphrase).
    public func changePassphrase(to new: Secret) throws(KeychainError) {
        try withExclusiveLock { () throws(KeychainError) in
            let items = try load() ?? []
            if let old = unlocked.withLock({ $0?.salt }) { SessionCache.drop(description: Self.cacheDescription(salt: old)) }
            let salt = Self.randomBytes(32)
            let key = try new.storage.withUnsafeBytes { (bytes) throws(KeychainError) in
                try Self.derive(bytes, salt: salt, KDFParameters.current)
            }
            try write(items, salt: salt, key: key, parameters: .current)
            unlocked.withLock { $0 = (salt, key, .current) }
            remember(key, salt: salt)
        }
    }

    /// The passphrase read from `fd` — all of it, one trailing newline dropped — for a new passphrase given to a script.
    public static func readPassphraseLine(from fd: Int32) throws(KeychainError) -> Secret {
        Secret(storage: try readPassphrase(from: fd))
    }

    /// The longest passphrase read from a descriptor: 64 KiB. Longer is an error, never a silent cut.
    static let maximumPassphraseLength = 64 << 10

    /// What of a passphrase input derives the key: all of it (format 2), or as files sealed before took it, its first
    /// line and at most 4096 bytes of it.
    static func counted(_ input: UnsafeRawBufferPointer, wholeInput: Bool) -> UnsafeRawBufferPointer {
        if wholeInput { return input }
        var end = min(input.count, 4096)
        if let newline = input.prefix(end).firstIndex(of: UInt8(ascii: "\n")) { end = newline }
        if end > 0 && input[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        return UnsafeRawBufferPointer(rebasing: input[0..<end])
    }

    /// All of `fd` as a passphrase (at most ``maximumPassphraseLength`` bytes), one trailing newline (`\n` or
    /// `\r\n`) dropped; an empty one is an error. A regular file is read from its start every time (pread, its
    /// offset untouched): git runs a credential helper several times for one operation (get, then store or erase),
    /// each inheriting the same descriptor, and a job may `exec 3<file` once for many commands. A pipe is read to
    /// its end.
    static func readPassphrase(from fd: Int32) throws(KeychainError) -> SecureBytes {
        let what = "file descriptor \(fd)"
        let capacity = maximumPassphraseLength + 1
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        defer {
            secureZero(buffer)
            buffer.deallocate()
        }
        let descriptor = FileDescriptor(rawValue: fd)
        var count = 0
        do {
            if let status = try? descriptor.fileStatus(), status.isRegularFile {
                count = try descriptor.read(into: buffer, at: 0)
            } else {
                while count < capacity {
                    let n = try descriptor.readSome(into: UnsafeMutableRawBufferPointer(rebasing: buffer[count...]))
                    if n == 0 { break }
                    count += n
                }
            }
        } catch {
            throw KeychainError(KeychainError.Code.locked, "cannot read the passphrase from \(what): \(error)")
        }
        guard count <= maximumPassphraseLength else {
            throw KeychainError(
                KeychainError.Code.invalidSecret,
                "the passphrase read from \(what) is longer than \(maximumPassphraseLength) bytes; nothing was changed")
        }
        if count > 0 && buffer[count - 1] == UInt8(ascii: "\n") {
            count -= 1
            if count > 0 && buffer[count - 1] == UInt8(ascii: "\r") { count -= 1 }
        }
        guard count > 0 else {
            throw KeychainError(KeychainError.Code.invalidSecret, "the passphrase read from \(what) is empty")
        }
        return SecureBytes(count: count) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[0..<count])) }
    }

    /// A new passphrase asked twice on the terminal, for the key file at `path`.
    public static func askNewPassphrase(for path: String) throws(KeychainError) -> Secret {
        let file = KeyFile(path: path, passphrase: .terminal, sessionCacheTimeout: nil)
        return Secret(storage: try file.obtainPassphrase(creating: true))
    }

    // MARK: Items (the Keychain's operations)

    struct Item {
        var service: String
        var account: String
        var label: String
        var secret: SecureBytes
        var created: Int64
        var modified: Int64
    }

    /// The items. No lock: the file is only ever replaced by a rename, so a read sees one whole version.
    func items() throws(KeychainError) -> [Item] {
        try load() ?? []
    }

    /// Unlocks the file now — its passphrase asked now if no cache holds the key, twice for a file not made yet — so
    /// that a command asks it before anything else (a secret typed first would be lost to a mistyped passphrase).
    public func unlockForWriting() throws(KeychainError) {
        if let bytes = try readFile() {
            _ = try key(for: try Sealed.parse(bytes, path: path))
        } else {
            _ = try currentKey(creating: true)
        }
    }

    /// Reads, changes and writes the items under the exclusive lock. The key is obtained *before* the lock (the
    /// passphrase may be asked, and nobody may wait on a lock held by a prompt); under the lock the file is read
    /// again, and a passphrase changed meanwhile asks once more.
    func modify<T>(_ body: (inout [Item]) throws(KeychainError) -> T) throws(KeychainError) -> T {
        if let bytes = try readFile() {
            _ = try key(for: try Sealed.parse(bytes, path: path))
        } else {
            _ = try currentKey(creating: true)
        }
        return try withExclusiveLock { () throws(KeychainError) in
            var items = try load() ?? []
            let result = try body(&items)
            let (salt, key, parameters) = try currentKey(creating: true)
            try write(items, salt: salt, key: key, parameters: parameters)
            return result
        }
    }

    // MARK: Reading and writing the file

    /// The file's bytes, or nil when it does not exist. Refuses what is not a plain, reasonably sized file.
    private func readFile() throws(KeychainError) -> [UInt8]? {
        let found: FileDescriptor.RegularFile
        do {
            found = try FileDescriptor.openRegularFile(path)
        } catch {
            if error == .tooManySymbolicLinkLevels { throw refused("is a symbolic link; the key file must be a regular file") }
            throw KeychainError(KeychainError.Code.serviceUnavailable, "cannot open the key file '\(path)': \(error)")
        }
        guard case .opened(let descriptor, let status) = found else {
            if case .missing = found { return nil }
            throw refused("is not a regular file")
        }
        return try descriptor.closeAfter { () throws(KeychainError) -> [UInt8] in
            try checkPermissions(status)
            guard status.st_size <= Self.maximumSize else {
                throw refused("is \(status.st_size) bytes, more than a key file's \(Self.maximumSize)")
            }
            do {
                return try descriptor.read(upTo: Int(status.st_size))
            } catch {
                throw KeychainError(KeychainError.Code.serviceUnavailable, "cannot read the key file '\(path)': \(error)")
            }
        }
    }

    /// As OpenSSH treats a private key: the file must be this user's and nobody else's to read or write (no bit for
    /// group or others), and its folder this user's (or root's) and not writable by others, or someone else could
    /// read the sealed file for an offline guess or swap it for one whose passphrase they know.
    private func checkPermissions(_ status: stat) throws(KeychainError) {
        let me = geteuid()
        guard status.st_uid == me else {
            throw KeychainError(
                KeychainError.Code.unsafePermissions,
                "the key file '\(path)' belongs to uid \(status.st_uid), not to you (uid \(me)); it was refused and left as it "
                    + "is (if it is yours: chown \(me) '\(path)')")
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw KeychainError(
                KeychainError.Code.unsafePermissions,
                "the key file '\(path)' can be read or written by others (mode 0\(String(mode, radix: 8))); it was refused "
                    + "and left as it is (chmod 600 '\(path)')")
        }
        let directory = directoryPart(path).isEmpty ? "." : directoryPart(path)
        guard let folder = try? fileStatus(directory) else { return }
        let folderMode = folder.permissions & 0o777
        // A sticky folder (/tmp) lets nobody else rename or remove this user's file.
        let sticky = folder.permissions & 0o1000 != 0
        guard folder.owner == me || folder.owner == 0, folderMode & 0o022 == 0 || sticky else {
            throw KeychainError(
                KeychainError.Code.unsafePermissions,
                "the folder '\(directory)' of the key file can be changed by others (mode 0\(String(folderMode, radix: 8)), "
                    + "uid \(folder.owner)); the key file was refused and left as it is (chmod 700 '\(directory)')")
        }
    }

    private func refused(_ what: String) -> KeychainError {
        KeychainError(KeychainError.Code.damagedStore, "the key file '\(path)' \(what); it was refused and left as it is")
    }

    /// The items in the file, nil when there is none; asks for the passphrase (or the cache) when needed.
    private func load() throws(KeychainError) -> [Item]? {
        guard let bytes = try readFile() else { return nil }
        let sealed = try Sealed.parse(bytes, path: path)
        let key = try key(for: sealed)
        return try sealed.open(with: key, path: path)
    }

    /// The key that opens `sealed`: this process's, the session cache's, or the passphrase's.
    private func key(for sealed: Sealed) throws(KeychainError) -> SecureBytes {
        let salt = sealed.header.salt
        let parameters = sealed.header.parameters
        if let known = unlocked.withLock({ $0 }), known.salt == salt, known.parameters == parameters, sealed.accepts(known.key) {
            return known.key
        }
        if let idle = sessionCacheTimeout,
            let cached = SessionCache.read(description: Self.cacheDescription(salt: salt), idle: idle, scope: sessionCacheScope),
            sealed.accepts(cached)
        {
            unlocked.withLock { $0 = (salt, cached, parameters) }
            return cached
        }
        let phrase = try obtainPassphrase(creating: false)
        let key = try phrase.withUnsafeBytes { (bytes) throws(KeychainError) in
            try Self.derive(bytes, salt: salt, parameters)
        }
        guard sealed.accepts(key) else {
            readPassphrase.withLock { $0 = nil }
            throw KeychainError(
                KeychainError.Code.wrongPassphrase,
                "the passphrase does not open the key file '\(path)'; nothing was changed")
        }
        unlocked.withLock { $0 = (salt, key, parameters) }
        remember(key, salt: salt)
        return key
    }

    /// The salt and key to seal with: the file's (already unlocked by `load`), or new ones for a new file.
    private func currentKey(creating: Bool) throws(KeychainError) -> ([UInt8], SecureBytes, KDFParameters) {
        if let known = unlocked.withLock({ $0 }) { return (known.salt, known.key, known.parameters) }
        willCreate?(path)
        let phrase = try obtainPassphrase(creating: true)
        let salt = Self.randomBytes(32)
        let key = try phrase.withUnsafeBytes { (bytes) throws(KeychainError) in
            try Self.derive(bytes, salt: salt, KDFParameters.current)
        }
        unlocked.withLock { $0 = (salt, key, .current) }
        remember(key, salt: salt)
        return (salt, key, .current)
    }

    private func remember(_ key: SecureBytes, salt: [UInt8]) {
        guard let timeout = sessionCacheTimeout else { return }
        SessionCache.store(
            key, description: Self.cacheDescription(salt: salt), idle: timeout, maximum: sessionCacheMaximum,
            scope: sessionCacheScope)
    }

    /// The session-keyring name of the key of a file with `salt`: a new passphrase (a new salt) never meets the
    /// old key.
    static func cacheDescription(salt: [UInt8]) -> String {
        "securestore:keyfile:" + hexString(salt.prefix(16))
    }

    private func obtainPassphrase(creating: Bool) throws(KeychainError) -> SecureBytes {
        switch passphrase.source {
        case .provider(let body):
            do {
                return try body(creating).storage
            } catch let error as KeychainError {
                throw error
            } catch {
                throw KeychainError(KeychainError.Code.locked, "no passphrase for the key file '\(path)': \(error)")
            }
        case .fileDescriptor(let fd):
            if let read = readPassphrase.withLock({ $0 }) { return read }
            let phrase = try Self.readPassphrase(from: fd)
            readPassphrase.withLock { $0 = phrase }
            return phrase
        case .unavailable:
            throw KeychainError(
                KeychainError.Code.locked,
                "the key file '\(path)' is locked and may not ask its passphrase here (prompts are off); give it with "
                    + "--passphrase-fd N (SECURESTORE_PASSPHRASE_FD), or unlock it once in this session")
        case .terminal:
            guard let tty = try? FileDescriptor.open("/dev/tty", [.readWrite, .noControllingTerminal]) else {
                throw KeychainError(
                    KeychainError.Code.locked,
                    "the key file '\(path)' is locked and there is no terminal to ask its passphrase on; give it with "
                        + "--passphrase-fd N (SECURESTORE_PASSPHRASE_FD), or unlock it once in this session")
            }
            defer { tty.close() }
            if sessionCacheTimeout != nil, !creating, sessionCacheLocation == nil {
                // Said where the person types, once per prompt: each command will ask again here.
                let why = SessionCache.unavailableReason.map { "(the unlocked key is not cached: \($0))\n" }
                    ?? ("(the unlocked key is not cached here: this process has no login session keyring; "
                        + "SECURESTORE_CACHE=user caches it for every process of this user)\n")
                try? tty.writeAll(Array(why.utf8))
            }
            let first = try Self.prompt(tty, creating ? "New passphrase for the key file \(path): " : "Passphrase for the key file \(path): ")
            guard first.count > 0 else {
                throw KeychainError(KeychainError.Code.invalidSecret, "the passphrase is empty; nothing was changed")
            }
            if creating {
                let again = try Self.prompt(tty, "Again: ")
                guard again.constantTimeEquals(first) else {
                    throw KeychainError(
                        KeychainError.Code.invalidSecret, "the two passphrases differ; nothing was changed")
                }
            }
            return first
        }
    }

    /// One line typed on the terminal `fd`, without its newline; a line of 4 KiB or more is an error.
    static func readLine(from fd: Int32, what: String) throws(KeychainError) -> SecureBytes {
        let capacity = 4096
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        defer {
            secureZero(buffer)
            buffer.deallocate()
        }
        var count = 0
        var ended = false
        while count < capacity {
            let n: Int
            do {
                n = try FileDescriptor(rawValue: fd).readSome(into: UnsafeMutableRawBufferPointer(rebasing: buffer[count..<(count + 1)]))
            } catch {
                throw KeychainError(KeychainError.Code.locked, "cannot read the passphrase from \(what): \(error)")
            }
            if n == 0 || buffer[count] == UInt8(ascii: "\n") {
                ended = true
                break
            }
            count += 1
        }
        guard ended else {
            throw KeychainError(
                KeychainError.Code.invalidSecret, "the passphrase typed on \(what) is \(capacity) bytes or longer; nothing was changed")
        }
        if count > 0 && buffer[count - 1] == UInt8(ascii: "\r") { count -= 1 }
        return SecureBytes(count: count) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[0..<count])) }
    }

    private static func prompt(_ tty: FileDescriptor, _ text: String) throws(KeychainError) -> SecureBytes {
        var saved = termios()
        let isTerminal = tcgetattr(tty.rawValue, &saved) == 0
        if isTerminal {
            var silent = saved
            silent.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(tty.rawValue, TCSAFLUSH, &silent)
        }
        defer {
            if isTerminal { tcsetattr(tty.rawValue, TCSAFLUSH, &saved) }
            try? tty.writeAll(Array("\n".utf8))
        }
        try? tty.writeAll(Array(text.utf8))
        return try readLine(from: tty.rawValue, what: "the terminal")
    }

    /// Writes `items` sealed under `key` (whose salt is `salt`): a temporary file, fsynced, renamed over the file,
    /// the folder fsynced.
    private func write(_ items: [Item], salt: [UInt8], key: SecureBytes, parameters: KDFParameters) throws(KeychainError) {
        let directory = directoryPart(path)
        do {
            try makeDirectories(directory.isEmpty ? "." : directory)
        } catch {
            throw KeychainError(
                KeychainError.Code.serviceUnavailable, "cannot make the folder '\(error.path)' of the key file: \(error.errno)")
        }
        let bytes = Sealed.seal(items, salt: salt, key: key, parameters: parameters)
        // What a writer killed by kill -9 left (under this exclusive lock, no live writer has one).
        ScratchFiles.sweep(directory)
        do {
            try replaceFile(path, with: bytes)
        } catch {
            throw KeychainError(
                error.errno.isDiskFull ? KeychainError.Code.storeFull : KeychainError.Code.serviceUnavailable,
                "cannot write the key file '\(path)': \(error.errno); it is unchanged")
        }
    }

    private func withExclusiveLock<T>(_ body: () throws(KeychainError) -> T) throws(KeychainError) -> T {
        try withLock(exclusive: true, body)
    }

    /// Runs `body` holding `flock` on `<file>.lock` (shared for reads, exclusive for changes).
    private func withLock<T>(exclusive: Bool, _ body: () throws(KeychainError) -> T) throws(KeychainError) -> T {
        let lockPath = path + ".lock"
        let directory = directoryPart(path)
        if exclusive {
            do {
                try makeDirectories(directory.isEmpty ? "." : directory)
            } catch {
                throw KeychainError(
                    KeychainError.Code.serviceUnavailable, "cannot make the folder '\(error.path)' of the key file: \(error.errno)")
            }
        }
        let lock: FileLock
        do {
            lock = try FileLock.open(lockPath)
        } catch {
            // A reader of a store that does not exist yet (no folder) needs no lock: there is nothing to read.
            if !exclusive && error == .noSuchFileOrDirectory { return try body() }
            throw KeychainError(KeychainError.Code.serviceUnavailable, "cannot open '\(lockPath)': \(error)")
        }
        defer { lock.close() }
        do {
            try lock.lock(exclusive ? .exclusive : .shared)
        } catch {
            throw KeychainError(KeychainError.Code.serviceUnavailable, "cannot lock '\(lockPath)': \(error)")
        }
        return try body()
    }

    // MARK: Cryptography (libcrypto)

    package static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// scrypt(passphrase, salt) → 32 bytes.
    static func derive(
        _ passphrase: UnsafeRawBufferPointer, salt: [UInt8], _ parameters: KDFParameters
    ) throws(KeychainError) -> SecureBytes {
        guard parameters.isAccepted else {
            throw KeychainError(KeychainError.Code.damagedStore, "the key file's scrypt parameters are out of range")
        }
        let (log2N, r, p) = (parameters.log2N, parameters.r, parameters.p)
        let passphrase = Self.counted(passphrase, wholeInput: parameters.wholeInput)
        var failed = false
        let key = SecureBytes(count: 32) { out in
            let ok = EVP_PBE_scrypt(
                passphrase.baseAddress?.assumingMemoryBound(to: CChar.self), passphrase.count, salt, salt.count,
                UInt64(1) << UInt64(log2N), UInt64(r), UInt64(p), parameters.memory + (1 << 20),
                out.baseAddress!.assumingMemoryBound(to: UInt8.self), 32)
            failed = ok != 1
        }
        if failed { throw KeychainError(KeychainError.Code.providerError, "libcrypto's scrypt failed") }
        return key
    }
}

// MARK: - The file format

/// `securestore-keyfile-2`: a 96-byte header, then the items sealed with AES-256-GCM (the header is the
/// associated data, so changing a field fails the tag).
///
///     magic "SSKEYFIL" (8) | version 2 (1) | kdf 1 = scrypt (1) | log2 N (1) | passphrase rule (1) | r (4) | p (4)
///     salt (32) | nonce (12) | check (16) | header checksum (16) | ciphertext | tag (16)
///
/// `check` is the first 16 bytes of SHA-256("securestore key file check" ‖ key): a wrong passphrase fails it. The
/// header checksum, the first 16 bytes of SHA-256("securestore key file header" ‖ the 80 bytes before it), is checked
/// before any key is derived: a damaged header (salt, parameters, check value) is "damaged", never "wrong
/// passphrase". A damaged body passes both and fails the tag. Format 1 (the same without the checksum) is read; a
/// write seals it as format 2 under the parameters its key was derived with. The plaintext: "SSKI" | count (4) | per
/// item: service, account, label (2-byte length + UTF-8 each), secret (4-byte length + bytes), created, modified (8
/// bytes each, microseconds since 1970). Integers are little-endian. The passphrase rule: 1, the whole input counts
/// (one trailing newline dropped); 0 (format 1, and format-1 files written again), its first line and at most 4096
/// bytes, as those files were made.
package struct Sealed {
    struct Header {
        var log2N: UInt8
        var r: UInt32
        var p: UInt32
        var salt: [UInt8]
        var nonce: [UInt8]
        var check: [UInt8]

        var wholeInput: Bool
        var parameters: KeyFile.KDFParameters { KeyFile.KDFParameters(log2N: log2N, r: r, p: p, wholeInput: wholeInput) }
    }
    static let magic = Array("SSKEYFIL".utf8)
    /// Format 2 adds the header checksum; format 1 (no checksum) is still read, and written again as format 2.
    static let version: UInt8 = 2
    /// The fields (format 1's whole header).
    static let fieldsSize = 8 + 4 + 8 + 32 + 12 + 16
    static let checksumSize = 16
    static let tagSize = 16

    /// The first 16 bytes of SHA-256("securestore key file header" ‖ fields).
    static func headerChecksum(_ fields: ArraySlice<UInt8>) -> [UInt8] {
        let input = Array("securestore key file header".utf8) + fields
        var digest = [UInt8](repeating: 0, count: 32)
        var size: UInt32 = 0
        _ = EVP_Digest(input, input.count, &digest, &size, EVP_sha256(), nil)
        return Array(digest.prefix(checksumSize))
    }

    let header: Header
    let headerBytes: [UInt8]
    let ciphertext: ArraySlice<UInt8>
    let tag: [UInt8]

    static func parse(_ bytes: [UInt8], path: String) throws(KeychainError) -> Sealed {
        func damaged(_ what: String) -> KeychainError {
            KeychainError(KeychainError.Code.damagedStore, "the key file '\(path)' \(what); it was refused and left as it is")
        }
        guard bytes.count >= 8, Array(bytes[0..<8]) == magic else {
            throw damaged(bytes.count < 8 ? "is truncated (\(bytes.count) bytes)" : "is not a SecureStore key file")
        }
        guard bytes.count > 8 else { throw damaged("is truncated") }
        guard bytes[8] <= version else {
            throw KeychainError(
                KeychainError.Code.damagedStore,
                "the key file '\(path)' was written by a newer SecureStore (format \(bytes[8])); this one reads format "
                    + "\(version). Update SecureStore; the file was left as it is")
        }
        let headerSize = bytes[8] >= 2 ? fieldsSize + checksumSize : fieldsSize
        guard bytes.count >= headerSize + tagSize else { throw damaged("is truncated (\(bytes.count) bytes)") }
        // Damage to the header (salt, check value, parameters) is told from a wrong passphrase before any key is
        // derived: format 2 carries a checksum of it.
        if bytes[8] >= 2 {
            let sum = bytes[fieldsSize..<headerSize]
            guard zip(headerChecksum(bytes[0..<fieldsSize]), sum).allSatisfy({ $0 == $1 }) else {
                throw damaged("is damaged: its header does not match its checksum")
            }
        }
        guard bytes[9] == 1 else { throw damaged("names an unknown key derivation (\(bytes[9]))") }
        guard bytes[11] <= 1, bytes[8] >= 2 || bytes[11] == 0 else { throw damaged("names an unknown passphrase rule (\(bytes[11]))") }
        func u32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * UInt32($1)) } }
        let header = Header(
            log2N: bytes[10], r: u32(12), p: u32(16), salt: Array(bytes[20..<52]), nonce: Array(bytes[52..<64]),
            check: Array(bytes[64..<80]), wholeInput: bytes[11] == 1)
        return Sealed(
            header: header, headerBytes: Array(bytes[0..<headerSize]),
            ciphertext: bytes[headerSize..<(bytes.count - tagSize)], tag: Array(bytes[(bytes.count - tagSize)...]))
    }

    static func checkValue(_ key: SecureBytes) -> [UInt8] {
        var input = Array("securestore key file check".utf8)
        key.withUnsafeBytes { input.append(contentsOf: $0) }
        defer { input.withUnsafeMutableBytes { secureZero($0) } }
        var digest = [UInt8](repeating: 0, count: 32)
        var size: UInt32 = 0
        _ = EVP_Digest(input, input.count, &digest, &size, EVP_sha256(), nil)
        return Array(digest.prefix(16))
    }

    /// Whether `key` is the file's (its check value matches).
    func accepts(_ key: SecureBytes) -> Bool {
        let expected = Self.checkValue(key)
        return zip(expected, header.check).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    func open(with key: SecureBytes, path: String) throws(KeychainError) -> [Item] {
        let plaintext = SecureBytes(count: ciphertext.count) { _ in }
        let ok = plaintext.withUnsafeBytes { out in
            key.withUnsafeBytes { keyBytes in
                Self.gcm(
                    encrypt: false, key: keyBytes, nonce: header.nonce, aad: headerBytes, input: Array(ciphertext),
                    output: UnsafeMutableRawBufferPointer(mutating: out), tag: tag) != nil
            }
        }
        guard ok else {
            throw KeychainError(
                KeychainError.Code.damagedStore,
                "the key file '\(path)' is damaged: the passphrase is right but its contents do not authenticate; it "
                    + "was refused and left as it is (restore it from a backup)")
        }
        return try plaintext.withUnsafeBytes { (bytes) throws(KeychainError) in try Self.decode(bytes, path: path) }
    }

    static func seal(_ items: [Item], salt: [UInt8], key: SecureBytes, parameters: KeyFile.KDFParameters) -> [UInt8] {
        let nonce = KeyFile.randomBytes(12)
        var header = magic + [version, 1, parameters.log2N, parameters.wholeInput ? 1 : 0]
        func le32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        header += le32(parameters.r) + le32(parameters.p) + salt + nonce + checkValue(key)
        header += headerChecksum(header[...])
        var plaintext = encode(items)
        defer { plaintext.withUnsafeMutableBytes { secureZero($0) } }
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        let tag = key.withUnsafeBytes { keyBytes in
            ciphertext.withUnsafeMutableBytes { out in
                gcm(encrypt: true, key: keyBytes, nonce: nonce, aad: header, input: plaintext, output: out, tag: nil)
            }
        }
        return header + ciphertext + (tag ?? [])
    }

    /// AES-256-GCM; returns the tag when encrypting, a non-nil empty array when decryption authenticated.
    package static func gcm(
        encrypt: Bool, key: UnsafeRawBufferPointer, nonce: [UInt8], aad: [UInt8], input: [UInt8],
        output: UnsafeMutableRawBufferPointer, tag: [UInt8]?
    ) -> [UInt8]? {
        guard let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        let keyPointer = key.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var length: Int32 = 0
        if encrypt {
            guard EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, keyPointer, nonce) == 1,
                EVP_EncryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1,
                input.isEmpty || EVP_EncryptUpdate(
                    context, output.baseAddress!.assumingMemoryBound(to: UInt8.self), &length, input, Int32(input.count)) == 1,
                EVP_EncryptFinal_ex(context, output.baseAddress?.assumingMemoryBound(to: UInt8.self), &length) == 1
            else { return nil }
            var tag = [UInt8](repeating: 0, count: tagSize)
            guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(tagSize), &tag) == 1 else { return nil }
            return tag
        }
        guard var expected = tag,
            EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, keyPointer, nonce) == 1,
            EVP_DecryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1,
            input.isEmpty || EVP_DecryptUpdate(
                context, output.baseAddress!.assumingMemoryBound(to: UInt8.self), &length, input, Int32(input.count)) == 1,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tagSize), &expected) == 1
        else { return nil }
        var scratch = [UInt8](repeating: 0, count: 16)
        guard EVP_DecryptFinal_ex(context, &scratch, &length) == 1 else { return nil }
        return []
    }

    typealias Item = KeyFile.Item

    static func encode(_ items: [Item]) -> [UInt8] {
        var out = Array("SSKI".utf8)
        // Sized once: a growing array would leave copies of secrets in memory it frees without wiping.
        out.reserveCapacity(
            8 + items.reduce(0) { $0 + 6 + $1.service.utf8.count + $1.account.utf8.count + $1.label.utf8.count + 4 + $1.secret.count + 16 })
        func le(_ value: UInt64, _ bytes: Int) { for i in 0..<bytes { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) } }
        func text(_ string: String) {
            let utf8 = Array(string.utf8.prefix(65_535))
            le(UInt64(utf8.count), 2)
            out += utf8
        }
        le(UInt64(items.count), 4)
        for item in items {
            text(item.service)
            text(item.account)
            text(item.label)
            le(UInt64(item.secret.count), 4)
            item.secret.withUnsafeBytes { out.append(contentsOf: $0) }
            le(UInt64(bitPattern: item.created), 8)
            le(UInt64(bitPattern: item.modified), 8)
        }
        return out
    }

    static func decode(_ bytes: UnsafeRawBufferPointer, path: String) throws(KeychainError) -> [Item] {
        let damaged = KeychainError(
            KeychainError.Code.damagedStore, "the key file '\(path)' holds items it cannot read; it was left as it is")
        var at = 0
        func take(_ count: Int) throws(KeychainError) -> UnsafeRawBufferPointer {
            guard count >= 0, at + count <= bytes.count else { throw damaged }
            defer { at += count }
            return UnsafeRawBufferPointer(rebasing: bytes[at..<(at + count)])
        }
        func le(_ count: Int) throws(KeychainError) -> UInt64 {
            try take(count).enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        }
        func text() throws(KeychainError) -> String {
            guard let string = String(validating: try take(Int(try le(2))), as: UTF8.self) else { throw damaged }
            return string
        }
        guard Array(try take(4)) == Array("SSKI".utf8) else { throw damaged }
        let count = Int(try le(4))
        var items: [Item] = []
        for _ in 0..<count {
            let service = try text()
            let account = try text()
            let label = try text()
            let secretBytes = try take(Int(try le(4)))
            let secret = SecureBytes(count: secretBytes.count) { $0.copyMemory(from: secretBytes) }
            let created = Int64(bitPattern: try le(8))
            let modified = Int64(bitPattern: try le(8))
            items.append(Item(service: service, account: account, label: label, secret: secret, created: created, modified: modified))
        }
        guard at == bytes.count else { throw damaged }
        return items
    }
}

// MARK: - The session cache

/// The kernel keyring (keyrings(7)): a `user` key holding the unsealed key and the deadline of its maximum life, in
/// the login session's keyring (pam_keyinit gives one to an SSH or console login; a container runtime such as runc
/// one to each container). Where the process has no session keyring of its own it would share the user's session
/// keyring `_uid_ses.<uid>` with every process of the uid in its user namespace (other containers included), so
/// nothing is cached there unless ``KeyFile/SessionCacheScope/user`` asks for it.
///
/// Permissions (0x002f0000): the owner may view, read, write, search and set attributes (the timeout; invalidating
/// needs search; write lets an expired copy, which the kernel keeps until its garbage collection, be replaced);
/// search); the possessor nothing, so a process that only possesses the session keyring — `su`, `runuser`, `sudo -u`,
/// `setpriv --reuid` to another user keep it — cannot read the key. Root can (it can read any memory anyway).
enum SessionCache {
    static let permissions: UInt32 = 0x002f_0000

    /// The login session keyring of this process, by its number, or nil when the process has none: the kernel
    /// then answers with the user's session keyring, which is what tells the two apart.
    static var loginSessionKeyring: Int32? {
        let session = securestore_keyctl_get_keyring_id(SECURESTORE_KEY_SPEC_SESSION_KEYRING)
        guard session > 0 else { return nil }
        let userSession = securestore_keyctl_get_keyring_id(SECURESTORE_KEY_SPEC_USER_SESSION_KEYRING)
        return session == userSession ? nil : Int32(truncatingIfNeeded: session)
    }

    /// Why the kernel keyring cannot be used by this process at all, or nil when it can: the `keyctl` system call
    /// refused (a container's seccomp filter — Docker's default blocks it — or a kernel built without keys).
    static var unavailableReason: String? {
        guard securestore_keyctl_get_keyring_id(SECURESTORE_KEY_SPEC_USER_SESSION_KEYRING) < 0 else { return nil }
        let error = Errno.current
        return "the kernel keyring is unavailable here (keyctl: \(error); a container's "
            + "seccomp filter may block it)"
    }

    /// The keyring the cache uses in `scope`, or nil when it is not kept: the login session's; with `.user` and no
    /// login session, the user's session keyring.
    static func keyring(_ scope: KeyFile.SessionCacheScope) -> Int32? {
        if let session = loginSessionKeyring { return session }
        guard scope == .user else { return nil }
        let id = securestore_keyctl_get_keyring_id(SECURESTORE_KEY_SPEC_USER_SESSION_KEYRING)
        return id > 0 ? Int32(truncatingIfNeeded: id) : nil
    }

    /// Seconds since the epoch, from the real-time clock the deadline is written in.
    private static var now: UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(max(0, spec.tv_sec))
    }

    /// Keeps `key` for `idle` after each use and never past `maximum` from now; returns whether it was kept.
    @discardableResult
    static func store(
        _ key: SecureBytes, description: String, idle: Duration, maximum: Duration, scope: KeyFile.SessionCacheScope
    ) -> Bool {
        guard let target = keyring(scope) else { return false }
        // An older copy is dropped first: the owner may not write a cached key, so add_key could not update it.
        drop(description: description)
        let life = UInt64(max(1, maximum.components.seconds))
        let deadline = now &+ life
        let payload = SecureBytes(count: 40) { out in
            key.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: 32) }
            for index in 0..<8 { out[32 + index] = UInt8(truncatingIfNeeded: deadline >> (56 - 8 * UInt64(index))) }
        }
        let id = payload.withUnsafeBytes { bytes in
            securestore_add_key("user", description, bytes.baseAddress, bytes.count, target)
        }
        guard id > 0 else { return false }
        let seconds = UInt32(clamping: min(max(1, idle.components.seconds), Int64(life)))
        // A key the kernel would keep for ever, or readable by more than this user: not kept at all.
        if securestore_keyctl_setperm(Int32(id), permissions) != 0 || securestore_keyctl_set_timeout(Int32(id), seconds) != 0 {
            _ = securestore_keyctl_invalidate(Int32(id))
            return false
        }
        return true
    }

    private static func find(_ description: String, scope: KeyFile.SessionCacheScope) -> Int32? {
        guard let ring = keyring(scope) else { return nil }
        let id = securestore_keyctl_search(ring, "user", description)
        return id > 0 ? Int32(id) : nil
    }

    /// The cached key, its idle timeout started again (never past its maximum life); nil when there is none, or it
    /// outlived its maximum (then it is dropped).
    static func read(description: String, idle: Duration, scope: KeyFile.SessionCacheScope) -> SecureBytes? {
        guard let id = find(description, scope: scope) else { return nil }
        var length = 0
        let payload = SecureBytes(count: 40) { out in
            length = securestore_keyctl_read(id, out.baseAddress, 40)
        }
        guard length == 40 else { return nil }
        let deadline = payload.withUnsafeBytes { bytes in
            (32..<40).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[$1]) }
        }
        let current = now
        guard current < deadline else {
            _ = securestore_keyctl_invalidate(id)
            return nil
        }
        let seconds = UInt32(clamping: min(max(1, idle.components.seconds), Int64(clamping: deadline - current)))
        _ = securestore_keyctl_set_timeout(id, seconds)
        return payload.withUnsafeBytes { SecureBytes($0.prefix(32)) }
    }

    @discardableResult
    static func drop(description: String) -> Bool {
        var dropped = false
        for scope in [KeyFile.SessionCacheScope.loginSession, .user] {
            while let id = find(description, scope: scope), securestore_keyctl_invalidate(id) == 0 { dropped = true }
        }
        return dropped
    }
}

// Helpers of the keyed-database tests. Everything here is `KD`-prefixed or private so that it never
// clashes with the other tests of this target.
import EncryptedDatabase
import Foundation
import Glibc
import Keychain
import SecureStore
import Testing

/// One test's world: a unique application name (so keychain items never meet another test's), a
/// throw-away data directory, and the real keyring of the harness.
final class KDFixture {
    let app: String
    let directory: URL
    let paths: AppPaths
    let keychain = Keychain()
    let name = "tasks"

    init(sourceLocation: SourceLocation = #_sourceLocation) throws {
        try #require(
            ProcessInfo.processInfo.environment["SECURESTORE_HARNESS_ROOT"] != nil,
            "run the tests inside Tests/Harness/with-keyring, never against your own keyring",
            sourceLocation: sourceLocation)
        app = "kdtest-\(UUID().uuidString.prefix(8).lowercased())"
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(app, isDirectory: true)
        paths = try AppPaths(app: app, dataDirectory: directory)
    }

    deinit {
        _ = try? keychain.delete(service: service, account: name)
        _ = try? keychain.delete(service: service, account: name + ".pending")
        try? FileManager.default.removeItem(at: directory)
    }

    var service: String { "\(app).database-key" }
    var path: String { paths.databaseURL(name: name).path }

    func open(configuration: DatabaseConfiguration = DatabaseConfiguration()) throws -> KeyedDatabase {
        try KeyedDatabase(paths: paths, name: name, keychain: keychain, configuration: configuration)
    }

    /// The current key's hex text as `secret-tool` (another Secret Service client) sees it.
    func storedHex(account: String? = nil) throws -> String? {
        let result = try kdRun(["secret-tool", "lookup", "service", service, "account", account ?? name])
        return result.status == 0 ? result.stdout : nil
    }

    func storedKey(account: String? = nil) throws -> DatabaseKey? {
        guard let hex = try storedHex(account: account) else { return nil }
        return try kdKey(hex: hex)
    }

    func hasPendingKey() throws -> Bool {
        try keychain.exists(service: service, account: name + ".pending")
    }

    /// Every file in the data directory except the lock file.
    func files() throws -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { !$0.hasSuffix(".lock") }.sorted()
    }
}

/// The rows every test writes: `item(id, title)` plus `user_version = 7`.
let kdRowCount = 300

func kdTitle(_ index: Int) -> String { "row \(index) – grüße" }

func kdFill(_ database: KeyedDatabase, rows: Int = kdRowCount) throws {
    try database.queue.write { db in
        try db.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        try db.execute("CREATE INDEX item_title ON item (title)")
        for index in 0..<rows {
            try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [index, kdTitle(index)])
        }
        try db.setUserVersion(7)
    }
}

/// Fails unless the database holds exactly the rows of `kdFill`.
func kdExpectRows(_ queue: DatabaseQueue, rows: Int = kdRowCount, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let titles = try queue.read { db in
        try db.fetch("SELECT title FROM item ORDER BY id") { try $0.string(at: 0) }
    }
    #expect(titles == (0..<rows).map(kdTitle), sourceLocation: sourceLocation)
    #expect(try queue.read { try $0.userVersion() } == 7, sourceLocation: sourceLocation)
}

func kdKey(hex: String) throws -> DatabaseKey {
    let text = hex.trimmingCharacters(in: .whitespacesAndNewlines)
    try #require(text.utf8.count == 64)
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(try #require(UInt8(text[index..<next], radix: 16)))
        index = next
    }
    return try DatabaseKey(bytes: bytes)
}

func kdBytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

func kdMode(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? Int) ?? -1
}

/// Expects `body` to throw an error whose code is `code` (SecureStoreError, KeychainError or
/// DatabaseError, compared by name) and returns its message.
@discardableResult
func kdExpectError<R>(
    _ code: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> String? {
    do {
        _ = try body()
        Issue.record("expected error \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as SecureStoreError {
        if error.code.name == code { return error.message }
        Issue.record("expected \(code), got SecureStoreError.\(error.code): \(error.message)", sourceLocation: sourceLocation)
    } catch let error as KeychainError {
        if error.code.name == code { return error.message }
        Issue.record("expected \(code), got KeychainError.\(error.code): \(error.message)", sourceLocation: sourceLocation)
    } catch let error as DatabaseError {
        if error.code.name == code { return error.message }
        Issue.record("expected \(code), got DatabaseError.\(error.code): \(error.message)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// The `securestore-stress` helper built beside the test bundle.
var kdStressBinary: String {
    URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("securestore-stress").path
}

struct KDProcessResult {
    let status: Int32
    /// The signal that ended the process, or 0.
    let signal: Int32
    let stdout: String
    let stderr: String
}

private struct KDSpawnFailure: Error, CustomStringConvertible {
    let description: String
}

/// Runs a command (found on PATH through /usr/bin/env) with `input` on standard input. Written on
/// posix_spawn and poll rather than Foundation's Process, whose waitUntilExit can hang when a child
/// leaves a daemon behind; the child starts with an empty signal mask and default handlers.
func kdRun(_ arguments: [String], input: Data = Data()) throws -> KDProcessResult {
    func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw KDSpawnFailure(description: "pipe: errno \(errno)") }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        return (fds[0], fds[1])
    }
    let stdin = try makePipe(), stdout = try makePipe(), stderr = try makePipe()
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, stdin.read, 0)
    posix_spawn_file_actions_adddup2(&actions, stdout.write, 1)
    posix_spawn_file_actions_adddup2(&actions, stderr.write, 2)

    let env = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
    let argv = (["/usr/bin/env"] + arguments).map { strdup($0) } + [nil]
    let envp = env.map { strdup($0) } + [nil]
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var emptySet = sigset_t()
    sigemptyset(&emptySet)
    var defaultSet = sigset_t()
    sigemptyset(&defaultSet)
    for signal in [SIGTERM, SIGINT, SIGPIPE, SIGCHLD, SIGHUP] { sigaddset(&defaultSet, signal) }
    posix_spawnattr_setsigmask(&attributes, &emptySet)
    posix_spawnattr_setsigdefault(&attributes, &defaultSet)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, "/usr/bin/env", &actions, &attributes, argv, envp)
    close(stdin.read)
    close(stdout.write)
    close(stderr.write)
    guard spawned == 0 else {
        close(stdin.write)
        close(stdout.read)
        close(stderr.read)
        throw KDSpawnFailure(description: "posix_spawn \(arguments): \(spawned)")
    }

    var pending = [UInt8](input)
    var written = 0
    var output = [Int32: [UInt8]]()
    var open: Set<Int32> = [stdout.read, stderr.read]
    var inputFD: Int32? = stdin.write
    if pending.isEmpty {
        close(stdin.write)
        inputFD = nil
    }
    signal(SIGPIPE, SIG_IGN)
    while !open.isEmpty || inputFD != nil {
        var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        if let inputFD { fds.append(pollfd(fd: inputFD, events: Int16(POLLOUT), revents: 0)) }
        guard poll(&fds, nfds_t(fds.count), -1) >= 0 else {
            if errno == EINTR { continue }
            break
        }
        for entry in fds where entry.revents != 0 {
            if entry.fd == inputFD {
                let n = pending[written...].withUnsafeBytes { write(entry.fd, $0.baseAddress, $0.count) }
                if n > 0 { written += n }
                if n <= 0 || written == pending.count {
                    close(entry.fd)
                    inputFD = nil
                }
            } else {
                var buffer = [UInt8](repeating: 0, count: 65536)
                let n = read(entry.fd, &buffer, buffer.count)
                if n > 0 {
                    output[entry.fd, default: []].append(contentsOf: buffer[0..<n])
                } else {
                    close(entry.fd)
                    open.remove(entry.fd)
                }
            }
        }
    }
    pending.removeAll()
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let signalled = (status & 0x7f) != 0
    return KDProcessResult(
        status: signalled ? 128 + (status & 0x7f) : (status >> 8) & 0xff,
        signal: signalled ? status & 0x7f : 0,
        stdout: String(decoding: output[stdout.read] ?? [], as: UTF8.self),
        stderr: String(decoding: output[stderr.read] ?? [], as: UTF8.self))
}

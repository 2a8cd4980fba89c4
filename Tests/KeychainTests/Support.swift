import Foundation
import Glibc
import Keychain
import Testing

/// The keyring harness (Tests/Harness/with-keyring) this run is inside. Keychain tests talk to a real
/// gnome-keyring on a private bus; outside the harness they must not run against the user's keyring.
enum Harness {
    static var root: String? { ProcessInfo.processInfo.environment["SECURESTORE_HARNESS_ROOT"] }

    /// Fails the test unless it runs inside `with-keyring` (`make test` does that).
    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws {
        try #require(root != nil, "run the tests with `make test` (inside Tests/Harness/with-keyring), never against your own keyring", sourceLocation: sourceLocation)
    }

    /// Runs `keyring-ctl COMMAND` (restart, lock, unlock, freeze, thaw, status).
    @discardableResult
    static func keyringCtl(_ command: String) throws -> ProcessResult {
        let result = try run(["keyring-ctl", command])
        if result.status != 0 {
            throw HarnessFailure(description: "keyring-ctl \(command) failed: \(result.stderr)")
        }
        return result
    }
}

struct HarnessFailure: Error, CustomStringConvertible {
    let description: String
}

/// What a finished process printed and how it ended.
struct ProcessResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Runs a command found on PATH (through /usr/bin/env) with `input` on standard input.
///
/// Written on posix_spawn and poll rather than Foundation's Process: Process.waitUntilExit can hang
/// when the child leaves a daemon behind (keyring-ctl starts gnome-keyring-daemon).
func run(_ arguments: [String], input: Data = Data(), environment: [String: String]? = nil) throws -> ProcessResult {
    func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw HarnessFailure(description: "pipe: errno \(errno)") }
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

    let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
    let argv = (["/usr/bin/env"] + arguments).map { strdup($0) } + [nil]
    let envp = env.map { strdup($0) } + [nil]
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    // The child starts with no blocked signals and default handlers: test threads block some, and a
    // daemon a child leaves behind must still stop on SIGTERM.
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
        close(stdin.write); close(stdout.read); close(stderr.read)
        throw HarnessFailure(description: "posix_spawn \(arguments): \(spawned)")
    }

    // Feed standard input and drain both outputs together, so that no pipe fills up and blocks.
    var pending = [UInt8](input)
    var written = 0
    var output = [Int32: [UInt8]]()
    var open: Set<Int32> = [stdout.read, stderr.read]
    var inputFD: Int32? = stdin.write
    if pending.isEmpty { close(stdin.write); inputFD = nil }
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
    let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    return ProcessResult(
        status: exitStatus,
        stdout: String(decoding: output[stdout.read] ?? [], as: UTF8.self),
        stderr: String(decoding: output[stderr.read] ?? [], as: UTF8.self))
}

/// A service name no other test uses, so tests never see each other's items.
func uniqueService(_ function: String = #function) -> String {
    "securestore-test.\(function.prefix(while: { $0 != "(" })).\(UUID().uuidString.prefix(8))"
}

/// Expects `body` to throw a KeychainError with `code`, records an issue otherwise, and returns the error.
@discardableResult
func expectError<R>(
    _ code: KeychainError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> KeychainError? {
    do {
        _ = try body()
        Issue.record("expected KeychainError.\(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as KeychainError {
        if error.code == code { return error }
        Issue.record("expected KeychainError.\(code), got \(error.code): \(error.message)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected KeychainError.\(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

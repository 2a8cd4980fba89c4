// Helpers shared by the test targets: the keyring harness, running processes, temporary directories.
public import Foundation
import Glibc
public import Testing

/// The keyring harness (Tests/Harness/with-keyring) this run is inside. Keychain tests talk to a real
/// gnome-keyring on a private bus; outside the harness they must not run against the user's keyring.
public enum Harness {
    public static var root: String? { ProcessInfo.processInfo.environment["SECURESTORE_HARNESS_ROOT"] }

    /// The Secret Service provider of this run: `gnome-keyring` (Tests/Harness/with-keyring) or
    /// `keepassxc` (Tests/Harness/with-keepassxc).
    public static var provider: String { ProcessInfo.processInfo.environment["SECURESTORE_PROVIDER"] ?? "gnome-keyring" }
    /// Whether this run talks to gnome-keyring, which `keyring-ctl` controls.
    public static var isGnomeKeyring: Bool { provider == "gnome-keyring" }
    /// Whether this run talks to KeePassXC, which `keepassxc-ctl` controls.
    public static var isKeePassXC: Bool { provider == "keepassxc" }

    /// Whether KeePassXC runs with its access and delete confirmations off (SECURESTORE_KEEPASSXC_CONFIRM=off).
    public static var keepassxcConfirmationsOff: Bool {
        isKeePassXC && ProcessInfo.processInfo.environment["SECURESTORE_KEEPASSXC_CONFIRM"] == "off"
    }

    /// Runs `keepassxc-ctl COMMAND` (approve, deny, absent, dialogs, status).
    @discardableResult
    public static func keepassxcCtl(_ command: String) throws -> ProcessResult {
        let result = try run(["keepassxc-ctl", command])
        if result.status != 0 {
            throw HarnessFailure(description: "keepassxc-ctl \(command) failed: \(result.stderr)")
        }
        return result
    }

    /// Runs COMMAND (freeze, thaw, status) through the control script of this run's provider.
    @discardableResult
    public static func providerCtl(_ command: String) throws -> ProcessResult {
        isKeePassXC ? try keepassxcCtl(command) : try keyringCtl(command)
    }

    /// Fails the test unless it runs inside `with-keyring` (`make test` does that).
    public static func require(sourceLocation: SourceLocation = #_sourceLocation) throws {
        try #require(root != nil, "run the tests with `make test` (inside Tests/Harness/with-keyring), never against your own keyring", sourceLocation: sourceLocation)
    }

    /// Runs `keyring-ctl COMMAND` (restart, lock, unlock, freeze, thaw, status).
    @discardableResult
    public static func keyringCtl(_ command: String) throws -> ProcessResult {
        let result = try run(["keyring-ctl", command])
        if result.status != 0 {
            throw HarnessFailure(description: "keyring-ctl \(command) failed: \(result.stderr)")
        }
        return result
    }
}

public struct HarnessFailure: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// What a finished process printed and how it ended.
public struct ProcessResult: Sendable {
    /// The exit status, or 128 + the signal number when a signal ended the process.
    public let status: Int32
    /// The signal that ended the process, or 0 when it exited.
    public let signal: Int32
    public let stdout: String
    public let stderr: String
}

/// Runs a command found on PATH (through /usr/bin/env) with `input` on standard input.
///
/// Written on posix_spawn and poll rather than Foundation's Process: Process.waitUntilExit can hang
/// when the child leaves a daemon behind (keyring-ctl starts gnome-keyring-daemon).
public func run(_ arguments: [String], input: Data = Data(), environment: [String: String]? = nil) throws -> ProcessResult {
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
        throw HarnessFailure(description: "posix_spawn \(arguments.first ?? "") failed: \(spawned)")
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
    let signal = status & 0x7f
    let exitStatus = signal == 0 ? (status >> 8) & 0xff : 128 + signal
    return ProcessResult(
        status: exitStatus, signal: signal,
        stdout: String(decoding: output[stdout.read] ?? [], as: UTF8.self),
        stderr: String(decoding: output[stderr.read] ?? [], as: UTF8.self))
}

/// A service name no other test uses, so tests never see each other's items.
public func uniqueService(_ function: String = #function) -> String {
    "securestore-test.\(function.prefix(while: { $0 != "(" })).\(UUID().uuidString.prefix(8))"
}


/// The stress helper (`Tests/Stress`, a package of its own that depends on the product; `make build-tests`
/// builds it): crash, concurrency, cross-version and soak scenarios in a separate process.
public let stressExecutable: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Stress/.build/debug/securestore-stress").path

/// The directory of the built products (`securestore`), beside the test bundle.
public let productsDirectory: URL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()

/// The path of a built product, e.g. `product("securestore")`.
public func product(_ name: String) -> String { productsDirectory.appendingPathComponent(name).path }

/// A fresh private (0700) temporary directory, removed when the returned object is released.
public final class TemporaryDirectory: @unchecked Sendable {
    public let url: URL
    public var path: String { url.path }

    public init() throws {
        var template = Array((NSTemporaryDirectory() + "/securestore-test.XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessFailure(description: "mkdtemp failed: errno \(errno)") }
        url = URL(fileURLWithPath: String(cString: made), isDirectory: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}

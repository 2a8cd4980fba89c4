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
    /// Whether this run has no D-Bus at all (Tests/Harness/with-keyfile): keys and tokens go to the encrypted key
    /// file, whose key the harness left in this run's session keyring.
    public static var isKeyFile: Bool { provider == "keyfile" }
    /// Unlocks the key file again after a test ran `securestore lock` (with-keyfile only; the passphrase the harness
    /// chose is in its throw-away folder), as the person types the passphrase once more. A no-op elsewhere.
    public static func unlockKeyFile() throws {
        guard isKeyFile, let root, let tool = ProcessInfo.processInfo.environment["SECURESTORE_TOOL"] else { return }
        let result = try run([
            "/bin/sh", "-c", "exec \"$0\" --app securestore-harness --passphrase-fd 3 keystore status 3<\"$1\"", tool,
            root + "/passphrase",
        ])
        if result.status != 0 { throw HarnessFailure(description: "unlocking the key file failed: \(result.stderr)") }
    }

    /// Whether a Secret Service answers in this run (not with-keyfile): tests that inspect the Secret Service itself
    /// (secret-tool, keyring-ctl, prompts) need one.
    public static var hasSecretService: Bool { !isKeyFile }

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

/// How a process ended, in the shape of swift-subprocess's `TerminationStatus`.
public enum TerminationStatus: Sendable, Equatable {
    /// It exited with this status.
    case exited(Int32)
    /// A signal ended it.
    case signaled(Int32)

    init(waitStatus status: Int32) {
        let signal = status & 0x7f
        self = signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
    }
}

/// The one process runner of the tests: posix_spawn with no blocked signals and default handlers (test threads
/// block some, and a daemon a child leaves behind must still stop on SIGTERM), never Foundation's Process, whose
/// waitUntilExit can hang when the child leaves a daemon behind (keyring-ctl starts gnome-keyring-daemon).
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: used by one test at a time; the descriptors are closed once.
    /// The child's process id.
    public let pid: pid_t
    /// The read end of the child's standard output, when it was captured; -1 otherwise.
    public let standardOutput: Int32

    /// Starts `arguments` (an absolute path, or a command looked up on PATH through /usr/bin/env) with standard
    /// input on /dev/null, standard error on /dev/null, and standard output captured when `captureOutput`.
    public init(_ arguments: [String], environment: [String: String]? = nil, captureOutput: Bool = false) throws {
        var output: (read: Int32, write: Int32) = (-1, -1)
        if captureOutput { output = try makePipe() }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if captureOutput {
            posix_spawn_file_actions_adddup2(&actions, output.write, 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        pid = try spawn(arguments, environment: environment, actions: &actions)
        if captureOutput { close(output.write) }
        standardOutput = output.read
    }

    deinit { if standardOutput >= 0 { close(standardOutput) } }

    /// Reads up to `count` bytes of the child's standard output, waiting for at least one (empty at its end).
    public func read(upTo count: Int) -> Data {
        var buffer = [UInt8](repeating: 0, count: count)
        while true {
            let n = Glibc.read(standardOutput, &buffer, count)
            if n < 0, errno == EINTR { continue }
            return Data(buffer.prefix(max(n, 0)))
        }
    }

    /// Sends `signal` to the child.
    public func kill(_ signal: Int32 = SIGKILL) { Glibc.kill(pid, signal) }

    /// Waits for the child to end.
    @discardableResult
    public func wait() -> TerminationStatus { waitForProcess(pid) }
}

/// Waits for the process `pid` (a child of this one) to end, retrying on EINTR.
@discardableResult
public func waitForProcess(_ pid: pid_t) -> TerminationStatus {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return TerminationStatus(waitStatus: status)
}

private func makePipe() throws -> (read: Int32, write: Int32) {
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { throw HarnessFailure(description: "pipe: errno \(errno)") }
    _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
    _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
    return (fds[0], fds[1])
}

/// posix_spawn of `arguments` with `actions`, an empty signal mask and default handlers.
private func spawn(
    _ arguments: [String], environment: [String: String]?, actions: inout posix_spawn_file_actions_t
) throws -> pid_t {
    let command = arguments.first?.hasPrefix("/") == true ? arguments : ["/usr/bin/env"] + arguments
    let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
    let argv = command.map { strdup($0) } + [nil]
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
    let spawned = posix_spawn(&pid, command[0], &actions, &attributes, argv, envp)
    guard spawned == 0 else { throw HarnessFailure(description: "posix_spawn \(command[0]) failed: \(spawned)") }
    return pid
}

/// Runs `arguments` (an absolute path, or a command looked up on PATH through /usr/bin/env) to its end with
/// `input` on standard input, and returns what it printed and how it ended.
public func run(_ arguments: [String], input: Data = Data(), environment: [String: String]? = nil) throws -> ProcessResult {
    let stdin = try makePipe(), stdout = try makePipe(), stderr = try makePipe()
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, stdin.read, 0)
    posix_spawn_file_actions_adddup2(&actions, stdout.write, 1)
    posix_spawn_file_actions_adddup2(&actions, stderr.write, 2)
    let pid: pid_t
    do {
        pid = try spawn(arguments, environment: environment, actions: &actions)
    } catch {
        for fd in [stdin.read, stdin.write, stdout.read, stdout.write, stderr.read, stderr.write] { close(fd) }
        throw error
    }
    close(stdin.read)
    close(stdout.write)
    close(stderr.write)

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
    let (status, signal): (Int32, Int32) =
        switch waitForProcess(pid) {
        case .exited(let code): (code, 0)
        case .signaled(let number): (128 + number, number)
        }
    return ProcessResult(
        status: status, signal: signal,
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
        let base = NSTemporaryDirectory().hasSuffix("/") ? String(NSTemporaryDirectory().dropLast()) : NSTemporaryDirectory()
        var template = Array((base + "/securestore-test.XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessFailure(description: "mkdtemp failed: errno \(errno)") }
        url = URL(fileURLWithPath: String(cString: made), isDirectory: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    /// The path of `name` in this directory.
    public func file(_ name: String) -> String { path + "/" + name }
}

/// What a test needs of the machine, for `.enabled(if:)` traits that say why a test did not run (never a test that
/// prints "skipped" and passes).
public enum Prerequisites {
    /// Whether this process runs as root: mounting a tmpfs or a read-only bind mount needs it.
    public static var isRoot: Bool { getuid() == 0 }

    /// Whether `program` is an executable on PATH.
    public static func installed(_ program: String) -> Bool {
        (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            .contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(program)") }
    }

    /// Whether Debian's python3-keyring is installed (python keyring's view of our tokens).
    public static var hasPythonKeyring: Bool {
        (try? run(["/usr/bin/python3", "-c", "import keyring"]).status) == 0
    }
}

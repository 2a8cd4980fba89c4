// Helpers of the reliability tests: `RL`-prefixed or private so they never clash with other tests.
import Foundation
import Glibc
import TestSupport
import Testing

/// Starts `arguments` (a path and its arguments) in the background with standard input, output and error
/// on /dev/null, and returns its process id (TestSupport's runner: an empty signal mask).
func rlSpawn(_ arguments: [String], environment: [String: String]? = nil) throws -> pid_t {
    try ChildProcess(arguments, environment: environment).pid
}

/// Kills `pid` with SIGKILL and reaps it. Returns whether it was still running (killed, not exited).
@discardableResult
func rlKill(_ pid: pid_t) -> Bool {
    kill(pid, SIGKILL)
    return waitForProcess(pid) == .signaled(SIGKILL)
}

/// Sleeps a random number of milliseconds in `range`.
func rlSleep(milliseconds range: ClosedRange<Int>) {
    usleep(useconds_t(Int.random(in: range) * 1000))
}

/// Runs `securestore-stress ARGUMENTS` to the end.
func rlStress(_ arguments: [String], environment: [String: String]? = nil) throws -> ProcessResult {
    try run([stressExecutable] + arguments, environment: environment)
}

/// Every file and directory under `root` (not `root` itself), with its mode bits, without following links.
func rlModes(under root: String) -> [(path: String, isDirectory: Bool, mode: Int)] {
    guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [] }
    var result: [(String, Bool, Int)] = []
    for case let relative as String in enumerator {
        let path = root + "/" + relative
        var status = stat()
        guard lstat(path, &status) == 0 else { continue }
        result.append((path, (status.st_mode & S_IFMT) == S_IFDIR, Int(status.st_mode & 0o7777)))
    }
    return result
}

/// The environment of this process with HOME and the XDG directories moved under `root`.
func rlEnvironment(root: String) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["HOME"] = root + "/home"
    environment["XDG_DATA_HOME"] = root + "/data"
    environment["XDG_CONFIG_HOME"] = root + "/config"
    return environment
}

/// A SHA-free fingerprint good enough to say "byte-identical": the bytes themselves, or nil when absent.
func rlContents(_ path: String) -> Data? {
    FileManager.default.contents(atPath: path)
}

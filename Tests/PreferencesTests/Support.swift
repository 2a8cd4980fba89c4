// Helpers shared by the Preferences tests: a fresh directory per test, file reads, the stress helper.
import Foundation
import TestSupport
import Glibc
@testable import Preferences

/// Runs `body` with a new empty directory, removed afterwards.
func withTemporaryDirectory<T>(_ body: (URL) throws -> T) throws -> T {
    let directory = try TemporaryDirectory()
    return try withExtendedLifetime(directory) { try body(directory.url) }
}

/// ``withTemporaryDirectory(_:)`` for a body that awaits.
func withTemporaryDirectoryAsync(_ body: (URL) async throws -> Void) async throws {
    let directory = try TemporaryDirectory()
    try await body(directory.url)
    withExtendedLifetime(directory) {}
}

/// A location `prefs.json`... in `directory` with the domain "test".
func testLocation(_ directory: URL, domain: String = "test") throws -> PreferencesLocation {
    try PreferencesLocation(directory: directory, domain: domain)
}

func fileBytes(_ url: URL) throws -> Data { try Data(contentsOf: url) }

func fileMode(_ path: String) -> mode_t? {
    var status = stat()
    guard lstat(path, &status) == 0 else { return nil }
    return status.st_mode & 0o7777
}

/// The built `securestore-stress` executable (TestSupport.stressExecutable), when it is there.
func stressExecutable() -> URL? {
    FileManager.default.isExecutableFile(atPath: TestSupport.stressExecutable)
        ? URL(filePath: TestSupport.stressExecutable) : nil
}

/// Runs the stress helper to completion; returns (status, stdout, stderr).
func runStress(_ arguments: [String]) throws -> (Int32, String, String) {
    guard let executable = stressExecutable() else { throw StressMissing() }
    let result = try TestSupport.run([executable.path] + arguments)
    return (result.status, result.stdout, result.stderr)
}

struct StressMissing: Error, CustomStringConvertible {
    var description: String { "securestore-stress not found next to the test bundle; run `swift build --build-tests`" }
}

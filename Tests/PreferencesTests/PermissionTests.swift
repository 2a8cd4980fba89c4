// Files are 0600 and directories 0700 whatever the umask; the XDG location rules.
import Foundation
import Glibc
import TestSupport
import Testing
@testable import Preferences

@Suite("Permissions and locations", .serialized)
struct PermissionTests {
    /// Runs `body` under `mask`, restoring the previous umask afterwards.
    private func withUmask<T>(_ mask: mode_t, _ body: () throws -> T) rethrows -> T {
        let previous = umask(mask)
        defer { umask(previous) }
        return try body()
    }

    @Test(arguments: [mode_t(0o000), mode_t(0o022), mode_t(0o277)])
    func filesAre0600AndDirectories0700UnderAnyUmask(_ mask: mode_t) throws {
        try withTemporaryDirectory { dir in
            let nested = dir.appending(path: "config/app", directoryHint: .isDirectory)
            let location = try PreferencesLocation(directory: nested, domain: "prefs")
            try withUmask(mask) {
                let prefs = try Preferences(location: location)
                try prefs.set("dark", forKey: "theme")
            }
            #expect(fileMode(dir.appending(path: "config").path) == 0o700)
            #expect(fileMode(nested.path) == 0o700)
            #expect(fileMode(location.fileURL.path) == 0o600)
            #expect(fileMode(location.lockURL.path) == 0o600)
        }
    }

    @Test func aSaveReplacesAWorldReadableFileWithA0600One() throws {
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            let prefs = try Preferences(location: location)
            try prefs.set(1, forKey: "a")
            chmod(location.fileURL.path, 0o644)
            try prefs.set(2, forKey: "a")
            #expect(fileMode(location.fileURL.path) == 0o600)
        }
    }

    @Test func appDomainsLiveUnderXDGConfigHome() throws {
        let location = try PreferencesLocation.app(
            "com.example.tasks", environment: ["XDG_CONFIG_HOME": "/x/config", "HOME": "/home/u"])
        #expect(location.fileURL.path == "/x/config/com.example.tasks/preferences.json")
        #expect(location.lockURL.path == "/x/config/com.example.tasks/preferences.json.lock")
        let fallback = try PreferencesLocation.app("tasks", domain: "ui", environment: ["HOME": "/home/u"])
        #expect(fallback.fileURL.path == "/home/u/.config/tasks/ui.json")
        // The spec says a relative XDG_CONFIG_HOME is ignored.
        let relative = try PreferencesLocation.app("tasks", environment: ["XDG_CONFIG_HOME": "rel", "HOME": "/home/u"])
        #expect(relative.fileURL.path == "/home/u/.config/tasks/preferences.json")
    }

    @Test(arguments: ["", ".", "..", "a/b", "x\0y"])
    func namesThatAreNotFileNamesAreRefused(_ name: String) {
        let app = expectError(PreferencesError.Code.invalidLocation) { _ = try PreferencesLocation.app(name, environment: ["HOME": "/home/u"]) }
        #expect(app?.message.contains("cannot be used as a file name") == true)
        expectError(PreferencesError.Code.invalidLocation) { _ = try PreferencesLocation(directory: URL(filePath: "/tmp"), domain: name) }
    }

    @Test func anAppDomainIsCreatedUnderTheConfigHome() throws {
        try withTemporaryDirectory { dir in
            let location = try PreferencesLocation.app("tasks", environment: ["XDG_CONFIG_HOME": dir.path])
            let prefs = try Preferences(location: location)
            try prefs.set("v", forKey: "k")
            #expect(FileManager.default.fileExists(atPath: dir.appending(path: "tasks/preferences.json").path))
            #expect(fileMode(dir.appending(path: "tasks").path) == 0o700)
        }
    }

    @Test func aFileWhereADirectoryShouldBeIsAnErrorWithThePath() throws {
        try withTemporaryDirectory { dir in
            let file = dir.appending(path: "occupied")
            try Data("x".utf8).write(to: file)
            let error = expectError(PreferencesError.Code.invalidLocation) {
                _ = try Preferences(location: PreferencesLocation(directory: file.appending(path: "app"), domain: "p"))
            }
            #expect(error?.message == "\(file.path) exists and is not a directory")
        }
    }
}

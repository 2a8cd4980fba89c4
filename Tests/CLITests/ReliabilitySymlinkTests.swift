import Foundation
import TestSupport
import Testing

/// Symbolic links where preference files should be. Decision (Docs/security.md): the preferences file and
/// its lock file are never followed — a link planted there could redirect reads, the lock file's creation
/// and its chmod — while a symlinked *directory* is followed (dotfile managers do that, and only the
/// directory's owner can make the link inside their own config home).
@Suite(.serialized) struct ReliabilitySymlinkTests {
    init() throws { try Harness.require() }

    private func configDirectory(_ app: String) throws -> String {
        try #require(Harness.root) + "/config/\(app)"
    }

    private func mode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    private func isSymbolicLink(_ path: String) -> Bool {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) != nil
    }

    @Test func aSymlinkedLockFileCreatesNothingWhereItPointsAndChangesNoMode() throws {
        let app = uniqueApp()
        let elsewhere = try TemporaryDirectory()
        let directory = try configDirectory(app)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // A dangling link: following it with O_CREAT would create the attacker's chosen file.
        let dangling = elsewhere.path + "/created-through-the-link"
        try FileManager.default.createSymbolicLink(atPath: directory + "/preferences.json.lock", withDestinationPath: dangling)
        let set = try securestore(["prefs", "set", "theme", "dark"], app: app)
        #expect(set.status == 65)
        #expect(set.stderr.hasPrefix("securestore: \(directory)/preferences.json.lock is a symbolic link"))
        #expect(!FileManager.default.fileExists(atPath: dangling))
        #expect(!FileManager.default.fileExists(atPath: directory + "/preferences.json"), "nothing saved")

        // A link to an existing file of the user: its mode (0644) and bytes stay as they are.
        let victim = elsewhere.path + "/victim"
        try Data("keep me\n".utf8).write(to: URL(fileURLWithPath: victim))
        chmod(victim, 0o644)
        try FileManager.default.removeItem(atPath: directory + "/preferences.json.lock")
        try FileManager.default.createSymbolicLink(atPath: directory + "/preferences.json.lock", withDestinationPath: victim)
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 65)
        #expect(try mode(victim) == 0o644)
        #expect(try Data(contentsOf: URL(fileURLWithPath: victim)) == Data("keep me\n".utf8))
    }

    /// The database's lock file is opened with O_NOFOLLOW too (Docs/security.md): a link planted there
    /// neither creates the file it points to nor changes an existing one.
    @Test func aSymlinkedDatabaseLockFileIsRefusedAndChangesNothing() throws {
        let app = uniqueApp()
        let elsewhere = try TemporaryDirectory()
        let directory = try #require(Harness.root) + "/data/\(app)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let dangling = elsewhere.path + "/created-through-the-link"
        try FileManager.default.createSymbolicLink(atPath: directory + "/.tasks.db.lock", withDestinationPath: dangling)
        let add = try securestore(["tasks", "add", "x"], app: app)
        #expect(add.status == 74)
        #expect(add.stderr.hasPrefix("securestore: the lock file '\(directory)/.tasks.db.lock' is a symbolic link"))
        #expect(add.stderr.split(separator: "\n").count == 1)
        #expect(!FileManager.default.fileExists(atPath: dangling))
        #expect(!FileManager.default.fileExists(atPath: directory + "/tasks.db"), "no database was made")
        #expect(try databaseKeyAccounts(app).isEmpty, "no key was made")

        let victim = elsewhere.path + "/victim"
        try Data("keep me\n".utf8).write(to: URL(fileURLWithPath: victim))
        chmod(victim, 0o644)
        try FileManager.default.removeItem(atPath: directory + "/.tasks.db.lock")
        try FileManager.default.createSymbolicLink(atPath: directory + "/.tasks.db.lock", withDestinationPath: victim)
        #expect(try securestore(["tasks", "add", "x"], app: app).status == 74)
        #expect(try mode(victim) == 0o644)
        #expect(try Data(contentsOf: URL(fileURLWithPath: victim)) == Data("keep me\n".utf8))
    }

    @Test func aSymlinkedPreferencesFileIsRefusedLeftAloneAndResetMovesTheLinkAside() throws {
        let app = uniqueApp()
        let other = uniqueApp()
        #expect(try securestore(["prefs", "set", "owner", "other"], app: other).status == 0)
        let target = try configDirectory(other) + "/preferences.json"
        let before = try Data(contentsOf: URL(fileURLWithPath: target))
        let directory = try configDirectory(app)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let link = directory + "/preferences.json"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)

        let get = try securestore(["prefs", "get", "owner"], app: app)
        #expect(get.status == 65)
        #expect(get.stderr.hasPrefix("securestore: \(link) is a symbolic link"))
        #expect(get.stdout.isEmpty, "nothing is read through the link")
        #expect(try securestore(["prefs", "set", "owner", "me"], app: app).status == 65)
        #expect(isSymbolicLink(link))
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == before, "the file it points to is byte-identical")

        #expect(try securestore(["prefs", "reset"], app: app).status == 0)
        #expect(try securestore(["prefs", "set", "owner", "me"], app: app).status == 0)
        #expect(!isSymbolicLink(link))
        #expect(try mode(link) == 0o600)
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == before)
    }

    @Test func aSymlinkedDirectoryIsFollowedAndItsFilesArePrivate() throws {
        let app = uniqueApp()
        let elsewhere = try TemporaryDirectory()
        try FileManager.default.createSymbolicLink(atPath: try configDirectory(app), withDestinationPath: elsewhere.path)
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        #expect(try securestore(["prefs", "get", "theme"], app: app).stdout == "dark\n")
        #expect(try mode(elsewhere.path + "/preferences.json") == 0o600)
        #expect(try mode(elsewhere.path + "/preferences.json.lock") == 0o600)
    }
}

import Foundation
import Keychain
import SecureStore
import TestSupport
import Testing

/// Key rotation against KeePassXC with stock settings, which asks the person to approve each process for
/// each entry it did not make: a rotation must touch only its own database's items, so that it neither
/// asks about the application's other databases nor fails when such a request is refused.
@Suite(
    .serialized,
    .enabled(
        if: Harness.isKeePassXC && !Harness.keepassxcConfirmationsOff, "runs inside with-keepassxc, stock settings"))
struct KeyedDatabaseKeePassXCTests {
    init() throws { try Harness.require() }

    @Test func aRotationReadsNoKeyOfTheApplicationsOtherDatabases() throws {
        let fixture = try KDFixture()
        // This process makes its own database: KeePassXC needs no approval for entries a process made.
        let database = try fixture.open()
        try kdFill(database)
        // Two more databases of the application, made by other processes (the tool, in other folders): their
        // key items are entries this process was never approved for.
        var environment = ProcessInfo.processInfo.environment
        environment["SECURESTORE_PROMPT"] = "never"
        for folder in ["second", "third"] {
            environment["XDG_DATA_HOME"] = fixture.directory.appendingPathComponent(folder).path
            let add = try run(
                [product("securestore"), "--app", fixture.app, "tasks", "add", "in \(folder)"], environment: environment)
            try #require(add.status == 0, "\(add.stderr)")
        }
        #expect(try fixture.accounts().filter { $0.contains("@") }.count == 3)

        // Any request to read another database's key is refused.
        let logPath = (Harness.root ?? "") + "/user.log"
        let logBefore = FileManager.default.contents(atPath: logPath)?.count ?? 0
        try Harness.keepassxcCtl("deny")
        let retired = try database.rotateKey()
        #expect(retired.alsoOpens.isEmpty)
        #expect(try Harness.keepassxcCtl("dialogs").stdout == "", "no dialog was shown or left")
        let log = String(decoding: (FileManager.default.contents(atPath: logPath) ?? Data()).dropFirst(logBefore), as: UTF8.self)
        #expect(!log.contains("deny: "), "nothing was asked, so nothing was refused: \(log)")
        try kdExpectRows(database.queue)
        try database.close()

        try Harness.keepassxcCtl("approve")
        let accounts = try fixture.accounts()
        #expect(accounts.filter { $0.hasSuffix(".pending") }.isEmpty, "\(accounts)")
        #expect(accounts.filter { $0.contains(".retired.") }.count == 1, "\(accounts)")
        let reopened = try fixture.open()
        try kdExpectRows(reopened.queue)
        try reopened.close()
        // The other databases keep opening with their own keys.
        environment["SECURESTORE_PROMPT"] = "always"
        for folder in ["second", "third"] {
            environment["XDG_DATA_HOME"] = fixture.directory.appendingPathComponent(folder).path
            let list = try run([product("securestore"), "--app", fixture.app, "tasks", "list"], environment: environment)
            #expect(list.status == 0 && list.stdout.contains("in \(folder)"), "\(list.stderr)")
        }
    }
}

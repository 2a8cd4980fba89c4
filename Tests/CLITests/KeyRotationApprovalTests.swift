import Foundation
import TestSupport
import Testing

/// A key rotation whose last step — storing the new key as the current key — needs the keyring's
/// approval that does not come (KeePassXC with its confirmations off still asks before a process
/// replaces an item another process made). The database must keep opening with the pending key, say
/// what to do, refuse another rotation, and finish at the next open that may prompt.
@Suite(.serialized, .enabled(if: Harness.keepassxcConfirmationsOff, "runs inside with-keepassxc, confirmations off"))
struct KeyRotationApprovalTests {
    init() throws { try Harness.require() }

    private func tool(_ arguments: [String], app: String, prompt: String) throws -> ProcessResult {
        var environment = ProcessInfo.processInfo.environment
        environment["SECURESTORE_PROMPT"] = prompt
        return try securestore(arguments, app: app, environment: environment)
    }

    /// The accounts of the database-key items in the keyring.
    private func keyAccounts(_ app: String) throws -> [String] {
        let search = try run(["secret-tool", "search", "--all", "service", "\(app).database-key"])
        return (search.stdout + search.stderr).split(separator: "\n")
            .filter { $0.hasPrefix("attribute.account = ") }
            .map { String($0.dropFirst("attribute.account = ".count)) }
            .sorted()
    }

    @Test func aRotationWhosePromotionIsNotApprovedKeepsOpeningAndFinishesLater() throws {
        let app = uniqueApp()
        #expect(try tool(["tasks", "add", "survives the rotation"], app: app, prompt: "never").status == 0)
        try Harness.keepassxcCtl("absent")
        defer { _ = try? Harness.keepassxcCtl("approve") }

        let rotate = try tool(["db", "rotate-key"], app: app, prompt: "never")
        #expect(rotate.status == 77, "a keyring that waits for approval, not bad data")
        #expect(rotate.stderr.contains("the database is now under the new key, stored as the pending key, but making it the current key needs the keyring's approval"))
        // Key items are named by the database id (Keys/README.md): `<id>.pending` is the rotation's new key.
        let stranded = try keyAccounts(app)
        let pending = stranded.filter { $0.hasSuffix(".pending") }
        #expect(pending.count == 1, "\(stranded)")
        #expect(rotate.stderr.contains("until then the database opens with the pending key (keyring service '\(app).database-key' account '\(pending.first ?? "?")'), and the next open that may ask for the keyring's approval finishes the rotation"))
        #expect(rotate.stderr.contains("(hint: run a securestore command on a terminal (or with SECURESTORE_PROMPT=always)"))

        // Opens (with the pending key) without waiting on anyone, again and again.
        for _ in 0..<2 {
            let started = ContinuousClock.now
            let list = try tool(["tasks", "list"], app: app, prompt: "never")
            #expect(list.status == 0, "\(list.stderr)")
            #expect(list.stdout.contains("survives the rotation"))
            #expect(ContinuousClock.now - started < .seconds(4))
        }
        // No second rotation over an unfinished one: its pending key is the one that opens the file.
        let again = try tool(["db", "rotate-key"], app: app, prompt: "never")
        #expect(again.status == 77)
        #expect(again.stderr.contains("the previous key rotation of"))
        #expect(try keyAccounts(app) == stranded)

        // Someone approves: the next open that may prompt finishes the rotation.
        try Harness.keepassxcCtl("approve")
        let finish = try tool(["tasks", "list"], app: app, prompt: "always")
        #expect(finish.status == 0, "\(finish.stderr)")
        #expect(finish.stdout.contains("survives the rotation"))
        let finished = try keyAccounts(app)
        #expect(finished.filter { $0.hasSuffix(".pending") }.isEmpty, "\(finished)")
        #expect(finished.filter { $0.contains("@") }.count == 1, "one current key: \(finished)")
        #expect(finished.filter { $0.contains(".retired.") }.count == 1, "the old key, retired: \(finished)")
        #expect(try tool(["tasks", "list"], app: app, prompt: "never").stdout.contains("survives the rotation"))
    }
}

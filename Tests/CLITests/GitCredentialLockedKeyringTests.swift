import Foundation
import TestSupport
import Testing

/// git through `securestore git-credential` when the keyring is locked: a clean failure git reports (and
/// then prompts, as with any failing helper), never "nothing stored"; and nothing is erased.
@Suite(.serialized, .enabled(if: Harness.isGnomeKeyring, "keyring-ctl drives gnome-keyring"))
struct GitCredentialLockedKeyringTests {
    init() throws { try Harness.require() }

    private func git(_ arguments: [String], app: String, input: String) throws -> ProcessResult {
        try TestSupport.git(arguments, input: input, credentialHelper: "!\(product("securestore")) --app \(app) git-credential")
    }

    private let lockedLine =
        "securestore: the keyring collection 'default' is locked; unlock it (log in to the desktop session or use your keyring manager, e.g. seahorse) and try again, or run where a prompt can ask you\n"

    private func expectLockedEverywhere(app: String) throws {
        let get = try securestore(["git-credential", "get"], app: app, input: "protocol=https\nhost=git.example.com\n\n")
        #expect(get.status == 77)
        #expect(get.stdout == "")
        #expect(get.stderr == lockedLine)

        let erase = try securestore(
            ["git-credential", "erase"], app: app,
            input: "protocol=https\nhost=git.example.com\nusername=alice\npassword=s3cret-pw\n\n")
        #expect(erase.status == 77)
        #expect(erase.stderr == lockedLine)

        // Real git: the helper's failure is reported, no password comes back, and (prompts disabled) fill fails.
        let fill = try git(["credential", "fill"], app: app, input: "protocol=https\nhost=git.example.com\n\n")
        #expect(fill.status != 0)
        #expect(!fill.stdout.contains("s3cret-pw"))
        #expect(fill.stderr.contains(lockedLine))
        #expect(!fill.stderr.contains("s3cret-pw"))
        let reject = try git(
            ["credential", "reject"], app: app,
            input: "protocol=https\nhost=git.example.com\nusername=alice\npassword=s3cret-pw\n\n")
        #expect(reject.stderr.contains(lockedLine))
    }

    private func expectStillStored(app: String) throws {
        let fill = try git(["credential", "fill"], app: app, input: "protocol=https\nhost=git.example.com\n\n")
        #expect(fill.status == 0)
        #expect(fill.stdout.contains("username=alice\npassword=s3cret-pw\n"))
        let search = try run(["secret-tool", "search", "--all", "service", "\(app).git"])
        #expect((search.stdout + search.stderr).contains("attribute.account = https://alice@git.example.com"))
    }

    @Test func keyringLockedSinceTheDaemonStartedFailsCleanlyAndErasesNothing() throws {
        let app = uniqueApp()
        let approve = try git(
            ["credential", "approve"], app: app,
            input: "protocol=https\nhost=git.example.com\nusername=alice\npassword=s3cret-pw\n\n")
        #expect(approve.status == 0)
        try Harness.keyringCtl("restart-locked")
        defer { _ = try? Harness.keyringCtl("unlock") }

        try expectLockedEverywhere(app: app)

        try Harness.keyringCtl("unlock")
        try expectStillStored(app: app)
    }

    @Test func keyringLockedWhileRunningFailsCleanlyAndErasesNothing() throws {
        let app = uniqueApp()
        let approve = try git(
            ["credential", "approve"], app: app,
            input: "protocol=https\nhost=git.example.com\nusername=alice\npassword=s3cret-pw\n\n")
        #expect(approve.status == 0)
        try Harness.keyringCtl("lock")
        defer { _ = try? Harness.keyringCtl("unlock") }

        try expectLockedEverywhere(app: app)
        let store = try securestore(
            ["git-credential", "store"], app: app,
            input: "protocol=https\nhost=git.example.com\nusername=alice\npassword=new-pw\n\n")
        #expect(store.status == 77)
        #expect(store.stderr == lockedLine)

        try Harness.keyringCtl("unlock")
        try expectStillStored(app: app)
    }
}

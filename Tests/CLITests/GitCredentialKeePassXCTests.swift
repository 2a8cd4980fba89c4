import Foundation
import TestSupport
import Testing

/// `securestore git-credential` against KeePassXC with stock settings: each helper process is a new
/// client that KeePassXC asks the user to approve for a credential another process stored.
@Suite(
    .serialized,
    .enabled(
        if: Harness.isKeePassXC && !Harness.keepassxcConfirmationsOff, "runs inside with-keepassxc, stock settings"))
struct GitCredentialKeePassXCTests {
    init() throws { try Harness.require() }

    private func helper(_ operation: String, app: String, input: String, prompt: String) throws -> ProcessResult {
        var environment = ProcessInfo.processInfo.environment
        environment["SECURESTORE_PROMPT"] = prompt
        return try securestore(["git-credential", operation], app: app, input: input, environment: environment)
    }

    @Test func aHelperThatMayNotPromptFailsAtOnceAndOneThatMayIsApproved() throws {
        let app = uniqueApp()
        let store = try helper(
            "store", app: app, input: "protocol=https\nhost=git.example.com\nusername=alice\npassword=s3cret-pw\n", prompt: "never")
        #expect(store.status == 0, "a new item needs no approval: \(store.stderr)")

        try Harness.keepassxcCtl("absent")
        defer { _ = try? Harness.keepassxcCtl("approve") }
        let started = ContinuousClock.now
        let refused = try helper("get", app: app, input: "protocol=https\nhost=git.example.com\n", prompt: "never")
        #expect(ContinuousClock.now - started < .seconds(3), "no wait on a dialog nobody sees")
        #expect(refused.status == 77)
        #expect(refused.stdout == "")
        #expect(refused.stderr.hasPrefix("securestore: the Secret Service (e.g. KeePassXC) asks you to approve this program's access to the keyring item for service '\(app).git' account 'https://alice@git.example.com'"))
        let erase = try helper(
            "erase", app: app, input: "protocol=https\nhost=git.example.com\nusername=alice\npassword=s3cret-pw\n", prompt: "never")
        #expect(erase.status == 77)

        try Harness.keepassxcCtl("approve")
        let approved = try helper("get", app: app, input: "protocol=https\nhost=git.example.com\n", prompt: "always")
        #expect(approved.status == 0, "\(approved.stderr)")
        #expect(approved.stdout == "username=alice\npassword=s3cret-pw\n", "the refused erase changed nothing")
    }
}

import Foundation
import Keychain
import TestSupport
import Testing

/// KeePassXC with its database locked (`keepassxc-ctl lock`, as its "Lock all databases" does). KeePassXC
/// cannot search a locked database: with "unlock before search" on (its default, the stock pass) a search
/// waits for someone to unlock it in a dialog; off (the confirmations-off pass) it answers with nothing.
/// Either way the Keychain must say "locked" at once, never "not found", and with prompts allowed run the
/// unlock prompt and wait for the person, as for gnome-keyring.
@Suite(.serialized, .enabled(if: Harness.isKeePassXC, "runs inside with-keepassxc"))
struct KeePassXCLockedTests {
    init() throws { try Harness.require() }

    private let locked =
        "the keyring collection 'default' is locked; unlock it (log in to the desktop session or use your keyring manager, e.g. seahorse) and try again, or run where a prompt can ask you"

    private func status() throws -> String { try Harness.keepassxcCtl("status").stdout }
    private func openDialogs() throws -> String { try Harness.keepassxcCtl("dialogs").stdout }

    /// Waits (bounded) until the stand-in user has closed every dialog and the database is unlocked, so the
    /// next test starts from an unlocked database with no dialog on screen.
    private func settle() throws {
        try Harness.keepassxcCtl("approve")
        for _ in 0..<100 where try openDialogs() != "" || status() != "unlocked\n" {
            usleep(100_000)
        }
        if try status() != "unlocked\n" { try Harness.keepassxcCtl("unlock") }
    }

    @Test func withoutPromptsALockedDatabaseIsLockedAtOnceNeverNotFound() throws {
        let service = uniqueService()
        let keychain = Keychain()  // no prompts
        try keychain.set("kept", service: service, account: "a")
        try Harness.keepassxcCtl("lock")
        defer { _ = try? settle() }

        let started = ContinuousClock.now
        #expect(expectError(KeychainError.Code.locked) { try keychain.secret(service: service, account: "a") }?.message == locked)
        #expect(ContinuousClock.now - started < .seconds(3), "no wait: the old behaviour was the 5 s timeout")
        // Nothing reads as absent while the database is locked: not the stored item, not one never stored.
        expectError(KeychainError.Code.locked) { try keychain.secret(service: service, account: "never-stored") }
        expectError(KeychainError.Code.locked) { try keychain.exists(service: service, account: "a") }
        expectError(KeychainError.Code.locked) { try keychain.items(service: service) }
        expectError(KeychainError.Code.locked) { try keychain.set("new", service: service, account: "a") }
        expectError(KeychainError.Code.locked) { try keychain.set("new", service: service, account: "b") }
        expectError(KeychainError.Code.locked) { try keychain.delete(service: service, account: "a") }
        #expect(ContinuousClock.now - started < .seconds(10), "each call failed at once")
        #expect(try openDialogs() == "", "no unlock dialog was opened for a call that may not prompt")
        #expect(try status() == "locked\n")

        try Harness.keepassxcCtl("unlock")
        #expect(try keychain.string(service: service, account: "a") == "kept", "nothing changed")
        #expect(try keychain.exists(service: service, account: "b") == false)
    }

    @Test func withPromptsTheUnlockPromptWaitsForThePersonAndTheCallGoesOn() throws {
        let service = uniqueService()
        try Keychain().set("kept", service: service, account: "a")
        try Harness.keepassxcCtl("lock")
        defer { _ = try? settle() }
        try Harness.keepassxcCtl("approve")  // the stand-in user types the database password
        let keychain = Keychain(configuration: .init(allowsPrompts: true, promptTimeout: .seconds(60)))

        #expect(try keychain.string(service: service, account: "a") == "kept")
        #expect(try status() == "unlocked\n")
        #expect(try openDialogs() == "")
        // Locked again: a store waits for the unlock too, then stores.
        try Harness.keepassxcCtl("lock")
        try keychain.set("new", service: service, account: "a")
        #expect(try keychain.string(service: service, account: "a") == "new")
    }

    @Test func aCancelledUnlockIsItsOwnErrorAndTheDatabaseStaysLocked() throws {
        let service = uniqueService()
        try Keychain().set("kept", service: service, account: "a")
        try Harness.keepassxcCtl("lock")
        defer { _ = try? settle() }
        try Harness.keepassxcCtl("deny")  // the person cancels the unlock dialog
        let keychain = Keychain(configuration: .init(allowsPrompts: true, promptTimeout: .seconds(60)))

        let error = expectError(KeychainError.Code.promptDismissed) { try keychain.set("new", service: service, account: "a") }
        #expect(error?.message == "the prompt to unlock the keyring for service '\(service)' account 'a' was dismissed; nothing was changed")
        #expect(try status() == "locked\n")
        #expect(try openDialogs() == "")

        try Harness.keepassxcCtl("unlock")
        #expect(try keychain.string(service: service, account: "a") == "kept")
    }

    @Test func anUnlockNobodyAnswersFailsAsLockedAfterThePromptTimeout() throws {
        let service = uniqueService()
        try Keychain().set("kept", service: service, account: "a")
        try Harness.keepassxcCtl("lock")
        defer { _ = try? settle() }
        try Harness.keepassxcCtl("absent")
        let keychain = Keychain(configuration: .init(allowsPrompts: true, promptTimeout: .seconds(2)))

        let started = ContinuousClock.now
        let error = expectError(KeychainError.Code.locked) { try keychain.secret(service: service, account: "a") }
        let elapsed = ContinuousClock.now - started
        #expect(error?.message.contains("is locked and nobody answered its unlock prompt within 2 s") == true)
        #expect(elapsed >= .seconds(2) && elapsed < .seconds(10), "waited for the person, bounded: \(elapsed)")
        #expect(try status() == "locked\n")
    }
}

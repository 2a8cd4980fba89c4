import Foundation
import Keychain
import TestSupport
import Testing

/// KeePassXC with stock settings asks the user to approve each client for each item it did not create
/// (an "Access Request" dialog behind a Secret Service Prompt). The harness's stand-in user answers it
/// (keepassxc-ctl approve / deny / absent); every test starts from an item another client (secret-tool)
/// made, so this test process has not been approved for it yet.
@Suite(
    .serialized,
    .enabled(
        if: Harness.isKeePassXC && !Harness.keepassxcConfirmationsOff, "runs inside with-keepassxc, stock settings"))
struct KeePassXCApprovalTests {
    init() throws { try Harness.require() }

    /// An item stored by secret-tool: a client of its own, so approval is needed to read or change it.
    private func storeWithSecretTool(_ service: String, _ value: String = "from-secret-tool") throws {
        let store = try run(
            ["secret-tool", "store", "--label=stored by secret-tool", "service", service, "account", "bob"],
            input: Data(value.utf8))
        try #require(store.status == 0, "secret-tool store: \(store.stderr)")
    }

    /// What another client sees: the stand-in user approves secret-tool's own lookup.
    private func lookup(_ service: String) throws -> String {
        try run(["secret-tool", "lookup", "service", service, "account", "bob"]).stdout
    }

    private func openDialogs() throws -> String { try Harness.keepassxcCtl("dialogs").stdout }

    @Test func withoutPromptsAnUnapprovedItemFailsAtOnceAndNothingChanges() throws {
        let service = uniqueService()
        try storeWithSecretTool(service)
        let keychain = Keychain()  // allowsPrompts is off by default
        try Harness.keepassxcCtl("absent")
        defer { _ = try? Harness.keepassxcCtl("approve") }

        let started = ContinuousClock.now
        let read = expectError(KeychainError.Code.approvalRequired) { try keychain.secret(service: service, account: "bob") }
        #expect(ContinuousClock.now - started < .seconds(2), "no wait on a dialog nobody sees")
        #expect(
            read?.message
                == "the Secret Service (e.g. KeePassXC) asks you to approve this program's access to the keyring item for service '\(service)' account 'bob', and this program may not show prompts here; run it again where you can answer the dialog (on a terminal of your desktop session), or allow the access in the provider's settings")
        expectError(KeychainError.Code.approvalRequired) { try keychain.set("replaced", service: service, account: "bob") }
        expectError(KeychainError.Code.approvalRequired) { try keychain.delete(service: service, account: "bob") }
        // Listing needs no approval: attributes and labels are readable, the secret is not read.
        #expect(try keychain.items(service: service) == [KeychainItem(service: service, account: "bob", label: "stored by secret-tool")])
        #expect(try openDialogs() == "", "no dialog was left open")

        try Harness.keepassxcCtl("approve")
        #expect(try lookup(service) == "from-secret-tool", "the item is unchanged")
    }

    @Test func withPromptsTheUserApprovesAndTheCallGoesOn() throws {
        let service = uniqueService()
        try storeWithSecretTool(service)
        try Harness.keepassxcCtl("approve")
        let keychain = Keychain(configuration: .init(allowsPrompts: true, promptTimeout: .seconds(30)))

        let started = ContinuousClock.now
        #expect(try keychain.string(service: service, account: "bob") == "from-secret-tool")
        let approved = ContinuousClock.now - started
        print("KeePassXC approval prompt round trip (stand-in user answers after 0.2 s): \(approved)")
        // Approved once: the next calls need no dialog.
        try keychain.set("replaced", service: service, account: "bob")
        #expect(try keychain.string(service: service, account: "bob") == "replaced")
        #expect(try lookup(service) == "replaced")
        #expect(try keychain.delete(service: service, account: "bob") == true)
        #expect(try keychain.exists(service: service, account: "bob") == false)
    }

    @Test func withPromptsButNobodyAnsweringItFailsAfterThePromptTimeoutAndChangesNothing() throws {
        let service = uniqueService()
        try storeWithSecretTool(service)
        try Harness.keepassxcCtl("absent")
        defer { _ = try? Harness.keepassxcCtl("approve") }
        let keychain = Keychain(configuration: .init(allowsPrompts: true, promptTimeout: .seconds(2)))

        let started = ContinuousClock.now
        let error = expectError(KeychainError.Code.approvalRequired) { try keychain.set("replaced", service: service, account: "bob") }
        let elapsed = ContinuousClock.now - started
        #expect(error?.message.contains("nobody answered its dialog within 2 s") == true)
        #expect(elapsed >= .seconds(2) && elapsed < .seconds(10), "waited for the person, bounded: \(elapsed)")
        // The Keychain dismissed its prompt; KeePassXC 2.7.4 still leaves its dialog on screen (answering
        // it later changes nothing for this call). The stand-in user closes it before the item is checked.
        try Harness.keepassxcCtl("approve")
        #expect(try lookup(service) == "from-secret-tool", "the item is unchanged")
    }

    /// KeePassXC 2.7 can crash while it saves after a quick series of writes (see with-keepassxc). A call
    /// waiting on its dialog then hears no answer ever: it must end at once as "unavailable", never after the
    /// prompt's timeout as "nobody answered the dialog".
    @Test func aProviderThatCrashesWhileItsDialogIsOpenEndsTheCallAtOnceAsUnavailable() async throws {
        let service = uniqueService()
        try storeWithSecretTool(service)
        // Auto-save is off in the harness: lock and unlock save the database, so the item outlives the crash.
        try Harness.keepassxcCtl("lock")
        try Harness.keepassxcCtl("unlock")
        try Harness.keepassxcCtl("absent")
        // Whatever happens below, the next test finds KeePassXC running and the stand-in user answering.
        defer {
            if (try? Harness.keepassxcCtl("status")) == nil { _ = try? Harness.keepassxcCtl("restart") }
            _ = try? Harness.keepassxcCtl("approve")
        }
        let keychain = Keychain(configuration: .init(allowsPrompts: true, promptTimeout: .seconds(90)))

        let started = ContinuousClock.now
        let call = Task.detached { () -> KeychainError? in
            do throws(KeychainError) {
                try keychain.set("replaced", service: service, account: "bob")
                return nil
            } catch { return error }
        }
        var dialogs = ""
        for _ in 0..<200 where !dialogs.contains("Access Request") {
            try await Task.sleep(for: .milliseconds(50))
            dialogs = try openDialogs()
        }
        try #require(dialogs.contains("Access Request"), "KeePassXC shows its dialog: \(dialogs)")
        try Harness.keepassxcCtl("crash")
        let error = await call.value
        let elapsed = ContinuousClock.now - started
        try Harness.keepassxcCtl("restart")

        #expect(error?.code == KeychainError.Code.serviceUnavailable)
        #expect(
            error?.message
                == "the Secret Service provider (e.g. KeePassXC) stopped while its prompt for service '\(service)' account 'bob' was open — it may have crashed; start it again and check the item before you retry")
        #expect(elapsed < .seconds(30), "ended when the provider went, not at the 90 s prompt timeout: \(elapsed)")
        #expect(try lookup(service) == "from-secret-tool", "the item is as KeePassXC last saved it")
    }

    @Test func aDeniedApprovalIsItsOwnErrorAndNothingChanges() throws {
        let service = uniqueService()
        try storeWithSecretTool(service)
        try Harness.keepassxcCtl("deny")
        defer { _ = try? Harness.keepassxcCtl("approve") }
        let keychain = Keychain(configuration: .init(allowsPrompts: true, promptTimeout: .seconds(30)))

        let error = expectError(KeychainError.Code.promptDismissed) { try keychain.delete(service: service, account: "bob") }
        #expect(
            error?.message
                == "the request to access the keyring item for service '\(service)' account 'bob' was denied or dismissed; nothing was changed")

        try Harness.keepassxcCtl("approve")
        #expect(try lookup(service) == "from-secret-tool", "the item is still there")
    }
}

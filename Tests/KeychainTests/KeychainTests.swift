import Foundation
import Keychain
import TestSupport
import Testing

/// The Keychain against a real provider on the harness's private bus: gnome-keyring (with-keyring) or
/// KeePassXC with stock settings (with-keepassxc).
@Suite(.serialized)
struct KeychainTests {
    /// Under KeePassXC this test process must be approved for items other clients (secret-tool) made:
    /// it may prompt, and the harness's stand-in user approves. KeePassXCApprovalTests covers the rest.
    let keychain = Keychain(configuration: .init(allowsPrompts: Harness.isKeePassXC))

    init() throws { try Harness.require() }

    @Test func textSecretRoundTripsAndSecretToolSeesIt() throws {
        let service = uniqueService()
        try keychain.set("hunter2 ✓ with spaces", service: service, account: "alice", label: "Alice's token")
        #expect(try keychain.string(service: service, account: "alice") == "hunter2 ✓ with spaces")
        let lookup = try run(["secret-tool", "lookup", "service", service, "account", "alice"])
        #expect(lookup.status == 0)
        #expect(lookup.stdout == "hunter2 ✓ with spaces")
    }

    @Test func binarySecretWithAll256ByteValuesRoundTripsAsBase64Text() throws {
        let service = uniqueService()
        let bytes = Data((0...255).map { UInt8($0) } + (0...255).reversed().map { UInt8($0) })
        try keychain.set(bytes, service: service, account: "blob")
        #expect(try keychain.data(service: service, account: "blob") == bytes)
        // Stored as text every provider keeps intact: base64, readable by any client.
        let lookup = try run(["secret-tool", "lookup", "service", service, "account", "blob"])
        #expect(lookup.stdout == "base64:" + bytes.base64EncodedString())
        expectError(KeychainError.Code.invalidSecret) { try keychain.string(service: service, account: "blob") }
    }

    @Test func textThatLooksLikeTheBinaryFormIsKeptApartFromIt() throws {
        let service = uniqueService()
        // Ours: stored encoded (with encoding=base64), read back as the same text.
        try keychain.set("base64:AAAA", service: service, account: "ours")
        #expect(try keychain.string(service: service, account: "ours") == "base64:AAAA")
        // Another client's text that starts with "base64:" is returned as it is, not decoded.
        let store = try run(
            ["secret-tool", "store", "--label=x", "service", service, "account", "theirs"], input: Data("base64:AAAA".utf8))
        #expect(store.status == 0)
        #expect(try keychain.string(service: service, account: "theirs") == "base64:AAAA")
    }

    @Test func emptySecretRoundTrips() throws {
        let service = uniqueService()
        try keychain.set("", service: service, account: "empty")
        #expect(try keychain.string(service: service, account: "empty") == "")
    }

    @Test func absentSecretIsNilNotAnError() throws {
        #expect(try keychain.secret(service: uniqueService(), account: "nobody") == nil)
        #expect(try keychain.exists(service: uniqueService(), account: "nobody") == false)
    }

    @Test func setReplacesTheSecretAndKeepsOneItem() throws {
        let service = uniqueService()
        try keychain.set("first", service: service, account: "a")
        try keychain.set(Data([0, 1, 2]), service: service, account: "a")  // other encoding
        try keychain.set("third", service: service, account: "a", label: "new label")
        #expect(try keychain.string(service: service, account: "a") == "third")
        #expect(try keychain.items(service: service) == [KeychainItem(service: service, account: "a", label: "new label")])
    }

    @Test func deleteRemovesTheItemAndReportsWhetherThereWasOne() throws {
        let service = uniqueService()
        try keychain.set("x", service: service, account: "a")
        try keychain.set("y", service: service, account: "b")
        #expect(try keychain.delete(service: service, account: "a") == true)
        #expect(try keychain.secret(service: service, account: "a") == nil)
        #expect(try keychain.delete(service: service, account: "a") == false)
        #expect(try keychain.string(service: service, account: "b") == "y")
        let lookup = try run(["secret-tool", "lookup", "service", service, "account", "a"])
        #expect(lookup.status != 0)
    }

    @Test func listShowsAccountsAndLabelsSortedNeverSecrets() throws {
        let service = uniqueService()
        try keychain.set("s1", service: service, account: "zed")
        try keychain.set("s2", service: service, account: "amy", label: "Amy")
        try keychain.set("s3", service: uniqueService(), account: "other")
        let items = try keychain.items(service: service)
        #expect(items.map(\.account) == ["amy", "zed"])
        #expect(items.map(\.label) == ["Amy", "\(service) (zed)"])
        #expect(try keychain.accounts(service: service) == ["amy", "zed"])
        #expect(!String(describing: items).contains("s1"))
    }

    @Test func findsWhatSecretToolStoredAndReplacesItInPlace() throws {
        let service = uniqueService()
        let store = try run(
            ["secret-tool", "store", "--label=stored by secret-tool", "service", service, "account", "bob"],
            input: Data("from-secret-tool".utf8))
        #expect(store.status == 0)
        #expect(try keychain.string(service: service, account: "bob") == "from-secret-tool")
        #expect(try keychain.exists(service: service, account: "bob"))
        #expect(try keychain.items(service: service).map(\.label) == ["stored by secret-tool"])

        try keychain.set("from-securestore", service: service, account: "bob")
        // --unlock: under KeePassXC secret-tool must be approved for the item this process stored.
        let search = try run(["secret-tool", "search", "--all", "--unlock", "service", service, "account", "bob"])
        #expect(search.stdout.components(separatedBy: "secret = ").count - 1 == 1, "exactly one item remains")
        #expect(try run(["secret-tool", "lookup", "service", service, "account", "bob"]).stdout == "from-securestore")
    }

    @Test func anotherApplicationsItemWithAttributesOfItsOwnIsNeverReplacedOrDeleted() throws {
        let service = uniqueService()
        let store = try run(
            ["secret-tool", "store", "--label=Other client label", "service", service, "account", "api", "domain", "example.org"],
            input: Data("theirs".utf8))
        #expect(store.status == 0)
        try keychain.set("mine", service: service, account: "api", label: "Mine")
        #expect(try keychain.string(service: service, account: "api") == "mine", "ours is preferred")
        #expect(try keychain.items(service: service).map(\.label) == ["Mine", "Other client label"])
        let theirs = try run(["secret-tool", "lookup", "service", service, "account", "api", "domain", "example.org"])
        #expect(theirs.stdout == "theirs", "their item, label and attributes are intact")

        #expect(try keychain.delete(service: service, account: "api") == true)
        #expect(try keychain.items(service: service).map(\.label) == ["Other client label"])
        #expect(try run(["secret-tool", "lookup", "service", service, "account", "api", "domain", "example.org"]).stdout == "theirs")
        // Still an item for (service, account), as secret-tool lookup would find it.
        #expect(try keychain.string(service: service, account: "api") == "theirs")
    }

    @Test(.enabled(if: Harness.isGnomeKeyring, "KeePassXC has no session collection"))
    func defaultCollectionSurvivesADaemonRestartAndSessionCollectionDoesNot() throws {
        let service = uniqueService()
        let session = Keychain(configuration: .init(collection: .session))
        try keychain.set("persistent", service: service, account: "a")
        try session.set("ephemeral", service: service, account: "a")
        // The collections are separate: each sees its own item.
        #expect(try keychain.string(service: service, account: "a") == "persistent")
        #expect(try session.string(service: service, account: "a") == "ephemeral")

        try Harness.keyringCtl("restart")

        // The same Keychain objects reconnect to the new daemon by themselves.
        #expect(try keychain.string(service: service, account: "a") == "persistent")
        #expect(try session.secret(service: service, account: "a") == nil)
    }

    @Test func twoHundredConcurrentOperationsFromManyTasksLoseNothing() async throws {
        let service = uniqueService()
        let keychain = self.keychain
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<100 {
                group.addTask {
                    try keychain.set("secret-\(index)", service: service, account: "account-\(index)")
                    let read = try keychain.string(service: service, account: "account-\(index)")
                    guard read == "secret-\(index)" else {
                        throw HarnessFailure(description: "account-\(index) read back \(read ?? "nil")")
                    }
                }
            }
            try await group.waitForAll()
        }
        let accounts = try keychain.accounts(service: service)
        #expect(accounts.count == 100)
        #expect(Set(accounts) == Set((0..<100).map { "account-\($0)" }))
    }

    @Test func oversizeSecretIsRefusedAndTheStoredOneIsUnchanged() throws {
        let service = uniqueService()
        try keychain.set("original", service: service, account: "a")
        let huge = Data(repeating: 0x41, count: Keychain.maximumSecretSize + 1)
        let error = expectError(KeychainError.Code.secretTooLarge) {
            try keychain.set(huge, service: service, account: "a")
        }
        #expect(error?.message.contains("65537 bytes") == true)
        #expect(error?.message.contains("65536") == true)
        #expect(try keychain.string(service: service, account: "a") == "original")
        // Exactly at the limit is accepted.
        let atLimit = Data(repeating: 0x42, count: Keychain.maximumSecretSize)
        try keychain.set(atLimit, service: service, account: "b")
        #expect(try keychain.data(service: service, account: "b") == atLimit)
    }

    @Test func invalidNamesAreRefusedWithAClearMessage() throws {
        let service = uniqueService()
        let empty = expectError(KeychainError.Code.invalidName) { try keychain.set("x", service: "", account: "a") }
        #expect(empty?.message == "the service name is empty")
        let nul = expectError(KeychainError.Code.invalidName) { try keychain.set("x", service: service, account: "a\0b") }
        #expect(nul?.message == "the account name contains a NUL byte")
        let long = String(repeating: "a", count: 2000)
        expectError(KeychainError.Code.invalidName) { try keychain.secret(service: service, account: long) }
        #expect(try keychain.items(service: service).isEmpty, "nothing was stored")
    }

    @Test(.enabled(if: Harness.isGnomeKeyring, "keyring-ctl drives gnome-keyring"))
    func lockedCollectionIsAnErrorDistinctFromNotFoundAndChangesNothing() throws {
        let service = uniqueService()
        try keychain.set("kept", service: service, account: "a")
        try Harness.keyringCtl("lock")
        defer { _ = try? Harness.keyringCtl("unlock") }

        let get = expectError(KeychainError.Code.locked) { try keychain.secret(service: service, account: "a") }
        #expect(get?.message.contains("locked") == true)
        expectError(KeychainError.Code.locked) { try keychain.set("new", service: service, account: "a") }
        expectError(KeychainError.Code.locked) { try keychain.set("new", service: service, account: "b") }
        expectError(KeychainError.Code.locked) { try keychain.delete(service: service, account: "a") }
        // A locked collection answers nothing until it is unlocked: also for an item never stored there (a
        // provider such as KeePassXC cannot search a locked database, so an empty answer would say nothing).
        expectError(KeychainError.Code.locked) { try keychain.secret(service: service, account: "never-stored") }
        expectError(KeychainError.Code.locked) { try keychain.exists(service: service, account: "a") }

        try Harness.keyringCtl("unlock")
        #expect(try keychain.string(service: service, account: "a") == "kept")
        #expect(try keychain.exists(service: service, account: "b") == false)
    }

    /// A get reads the collection's `Locked` property only when its search finds nothing (issue 33 #7): a collection
    /// locked between two calls of one process, on one connection, must still be "locked", never "not found" —
    /// gnome-keyring still finds the item (and leaves it out of GetSecrets), KeePassXC finds nothing at all.
    @Test(.enabled(if: Harness.hasSecretService, "needs a Secret Service to lock"))
    func aCollectionLockedBetweenTwoGetsIsLockedNeverNotFound() throws {
        let service = uniqueService()
        let keychain = Keychain()  // no prompts: a locked collection is an error at once, and no dialog opens
        try keychain.set("kept", service: service, account: "a")
        #expect(try keychain.string(service: service, account: "a") == "kept")
        #expect(try keychain.secret(service: service, account: "never-stored") == nil, "absent is nil, not an error")

        try Harness.providerCtl("lock")
        defer { _ = try? Harness.providerCtl("unlock") }
        let locked = "the keyring collection 'default' is locked; unlock it (log in to the desktop session or use your keyring manager, e.g. seahorse) and try again, or run where a prompt can ask you"
        let started = ContinuousClock.now
        #expect(expectError(KeychainError.Code.locked) { try keychain.secret(service: service, account: "a") }?.message == locked)
        #expect(
            expectError(KeychainError.Code.locked) { try keychain.secret(service: service, account: "never-stored") }?.message
                == locked, "an item never stored is not 'not found' either while the collection is locked")
        #expect(expectError(KeychainError.Code.locked) { try keychain.set("new", service: service, account: "a") }?.message == locked)
        #expect(expectError(KeychainError.Code.locked) { try keychain.set("new", service: service, account: "b") }?.message == locked)
        #expect(ContinuousClock.now - started < .seconds(3), "each call failed at once, no wait on a dialog")
        if Harness.isKeePassXC {
            #expect(try Harness.keepassxcCtl("dialogs").stdout == "", "no unlock dialog for a call that may not prompt")
        }
        #expect(try Harness.providerCtl("status").stdout == "locked\n")

        try Harness.providerCtl("unlock")
        let kept = try keychain.string(service: service, account: "a")
        #expect(kept == "kept", "nothing changed while locked")
        let refused = try keychain.string(service: service, account: "b")
        #expect(refused == nil, "the refused set made nothing")
        let absent = try keychain.string(service: service, account: "never-stored")
        #expect(absent == nil, "absent is nil again once unlocked")
        try keychain.set("changed", service: service, account: "a")
        let changed = try keychain.string(service: service, account: "a")
        #expect(changed == "changed")
    }

    @Test(.enabled(if: Harness.isGnomeKeyring, "keyring-ctl drives gnome-keyring"))
    func keyringLockedSinceTheDaemonStartedIsLockedEverywhereNeverAnEmptyList() throws {
        let service = uniqueService()
        try keychain.set("kept", service: service, account: "a")
        try keychain.set(Data([0, 1, 2]), service: service, account: "b")
        // As after an SSH login: the login keyring stays locked on disk and shows only hashed attributes.
        try Harness.keyringCtl("restart-locked")
        defer { _ = try? Harness.keyringCtl("unlock") }

        let locked = "the keyring collection 'default' is locked; unlock it (log in to the desktop session or use your keyring manager, e.g. seahorse) and try again, or run where a prompt can ask you"
        #expect(expectError(KeychainError.Code.locked) { try keychain.items(service: service) }?.message == locked)
        #expect(expectError(KeychainError.Code.locked) { try keychain.accounts(service: service) }?.message == locked)
        #expect(expectError(KeychainError.Code.locked) { try keychain.secret(service: service, account: "a") }?.message == locked)
        expectError(KeychainError.Code.locked) { try keychain.delete(service: service, account: "a") }
        expectError(KeychainError.Code.locked) { try keychain.set("new", service: service, account: "a") }
        expectError(KeychainError.Code.locked) { try keychain.set("new", service: service, account: "c") }
        #expect(expectError(KeychainError.Code.locked) { try keychain.exists(service: service, account: "a") }?.message == locked)
        expectError(KeychainError.Code.locked) { try keychain.secret(service: service, account: "never-stored") }

        try Harness.keyringCtl("unlock")
        #expect(try keychain.items(service: service).map(\.account) == ["a", "b"])
        #expect(try keychain.string(service: service, account: "a") == "kept")
        #expect(try keychain.data(service: service, account: "b") == Data([0, 1, 2]))
        #expect(try keychain.exists(service: service, account: "c") == false)
    }

    @Test(.enabled(if: Harness.isGnomeKeyring, "keyring-ctl drives gnome-keyring"))
    func lockedCollectionWithPromptsAllowedButNobodyToAnswerFailsWithinThePromptTimeout() throws {
        let service = uniqueService()
        try keychain.set("kept", service: service, account: "a")
        try Harness.keyringCtl("lock")
        defer { _ = try? Harness.keyringCtl("unlock") }
        // gnome-keyring's prompter has no display here: the prompt ends without an unlock.
        let prompting = Keychain(configuration: .init(allowsPrompts: true, promptTimeout: .seconds(2)))
        let started = ContinuousClock.now
        let outcome = Result { try prompting.secret(service: service, account: "a") }
        let error = try #require(outcome.failureValue as? KeychainError)
        let code = error.code
        #expect(code == KeychainError.Code.locked || code == KeychainError.Code.promptDismissed, "\(code): \(error.message)")
        #expect(!error.message.contains("kept"))
        #expect(ContinuousClock.now - started < .seconds(10), "bounded by the prompt timeout")
        #expect(try Harness.keyringCtl("status").stdout == "locked\n")
        try Harness.keyringCtl("unlock")
        #expect(try keychain.string(service: service, account: "a") == "kept")
    }

    @Test func stuckServiceTimesOutInsteadOfBlockingForever() throws {
        let service = uniqueService()
        try keychain.set("kept", service: service, account: "a")
        let impatient = Keychain(configuration: .init(timeout: .milliseconds(300)))
        try Harness.providerCtl("freeze")
        // Thawed whatever happens: a daemon left stopped would hang every later test.
        var thawed = false
        defer { if !thawed { _ = try? Harness.providerCtl("thaw") } }
        let started = ContinuousClock.now
        let error = expectError(KeychainError.Code.timedOut) {
            try impatient.secret(service: service, account: "a")
        }
        let elapsed = ContinuousClock.now - started
        try Harness.providerCtl("thaw")
        thawed = true
        #expect(error?.message.contains("did not answer") == true)
        // Without the deadline the call would wait for GDBus's own 25 s reply timeout: a generous bound
        // still tells the two apart on a loaded machine.
        #expect(elapsed < .seconds(10), "bounded by the 300 ms timeout (one reconnect at most), took \(elapsed)")
        #expect(try keychain.string(service: service, account: "a") == "kept")
    }

    @Test func noSessionBusIsAClearErrorThatSaysHowToStartOne() throws {
        let service = uniqueService()
        try keychain.set("kept", service: service, account: "a")
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        environment["DISPLAY"] = nil
        let result = try run([stressTool, "keychain", "get", service, "a"], environment: environment)
        #expect(result.status == 1)
        #expect(result.stderr.hasPrefix("error noSessionBus: no D-Bus session bus"))
        #expect(result.stderr.contains("dbus-run-session"))
        #expect(!result.stdout.contains("kept"))
        #expect(try keychain.string(service: service, account: "a") == "kept")
    }

    @Test func aBusWithNoSecretServiceIsAClearErrorThatNamesProviders() throws {
        // A real session bus whose configuration has no service directories, so nothing provides or can
        // activate org.freedesktop.secrets.
        let directory = try TemporaryDirectory()
        let config = directory.path + "/session.conf"
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:tmpdir=\(directory.path)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let result = try run(["dbus-run-session", "--config-file=\(config)", "--", stressTool, "keychain", "get", "s", "a"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("error serviceUnavailable: no Secret Service provider answers on the session bus"))
        #expect(result.stderr.contains("gnome-keyring-daemon"))
    }

    @Test func secretNeverPrintsItself() throws {
        let secret = Secret(string: "hunter2")
        #expect("\(secret)" == "Secret(<redacted>)")
        #expect(String(reflecting: secret) == "Secret(<redacted>)")
        var dumped = ""
        dump(secret, to: &dumped)
        #expect(!dumped.contains("hunter2"))
        #expect(secret == Secret(bytes: Array("hunter2".utf8)))
        #expect(secret != Secret(string: "hunter3"))
        #expect(secret != Secret(string: "hunter"))
        #expect(secret.stringValue() == "hunter2")
    }
}

/// The built `securestore-stress` helper (TestSupport.stressExecutable).
let stressTool = stressExecutable

extension Result {
    /// The error, for a failure.
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

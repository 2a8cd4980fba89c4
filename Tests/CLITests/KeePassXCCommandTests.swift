import Foundation
import TestSupport
import Testing

/// The tool against KeePassXC as a person meets it: a locked database, and prompts that must not leave a
/// dialog behind. Runs in both KeePassXC passes of `make test` (stock settings, with "unlock before search"
/// on; confirmations off, with it off).
@Suite(.serialized, .enabled(if: Harness.isKeePassXC, "runs inside with-keepassxc"))
struct KeePassXCCommandTests {
    init() throws { try Harness.require() }

    private func tool(_ arguments: [String], app: String, input: String = "", prompt: String) throws -> ProcessResult {
        var environment = ProcessInfo.processInfo.environment
        environment["SECURESTORE_PROMPT"] = prompt
        return try securestore(arguments, app: app, input: input, environment: environment)
    }

    private func openDialogs() throws -> String { try Harness.keepassxcCtl("dialogs").stdout }

    private let lockedLine =
        "securestore: the keyring collection 'default' is locked; unlock it (log in to the desktop session or use your keyring manager, e.g. seahorse) and try again, or run where a prompt can ask you\n"

    @Test func aLockedDatabaseIs77AtOnceNeverNotFoundAndAPromptUnlocksIt() throws {
        let app = uniqueApp()
        let credential = "protocol=https\nhost=git.example.com\nusername=alice\npassword=s3cret-pw\n"
        #expect(try tool(["token", "set", "t"], app: app, input: "kept", prompt: "never").status == 0)
        #expect(try tool(["tasks", "add", "survives the lock"], app: app, prompt: "never").status == 0)
        #expect(try tool(["git-credential", "store"], app: app, input: credential, prompt: "never").status == 0)
        try Harness.keepassxcCtl("lock")
        defer {
            _ = try? Harness.keepassxcCtl("approve")
            if (try? Harness.keepassxcCtl("status").stdout) != "unlocked\n" { _ = try? Harness.keepassxcCtl("unlock") }
        }

        // Without prompts: 77 "locked" at once — never "no token", an empty credential or a missing key.
        let commands: [(arguments: [String], input: String)] = [
            (["token", "get", "t"], ""),
            (["git-credential", "get"], "protocol=https\nhost=git.example.com\n"),
            (["tasks", "list"], ""),
            (["tasks", "add", "not while locked"], ""),
            (["token", "set", "--force", "t"], "new"),
            (["git-credential", "erase"], credential),
        ]
        for (arguments, input) in commands {
            let started = ContinuousClock.now
            let result = try tool(arguments, app: app, input: input, prompt: "never")
            let elapsed = ContinuousClock.now - started
            #expect(result.status == 77, "\(arguments): \(result.stderr)")
            #expect(result.stderr == lockedLine, "\(arguments)")
            #expect(result.stdout == "", "\(arguments)")
            #expect(elapsed < .seconds(3), "\(arguments) failed at once (the old behaviour was the 5 s timeout): \(elapsed)")
        }
        #expect(try openDialogs() == "", "nothing asked the person to unlock")
        #expect(try Harness.keepassxcCtl("status").stdout == "locked\n")

        // With prompts: KeePassXC's unlock dialog asks the person (the stand-in types the password), then
        // the command goes on; nothing changed while it was locked.
        try Harness.keepassxcCtl("approve")
        let get = try tool(["token", "get", "t"], app: app, prompt: "always")
        #expect(get.status == 0, "\(get.stderr)")
        #expect(get.stdout == "kept")
        #expect(try Harness.keepassxcCtl("status").stdout == "unlocked\n")
        let list = try tool(["tasks", "list"], app: app, prompt: "always")
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains("survives the lock") && !list.stdout.contains("not while locked"))
        let fill = try tool(["git-credential", "get"], app: app, input: "protocol=https\nhost=git.example.com\n", prompt: "always")
        #expect(fill.stdout == "username=alice\npassword=s3cret-pw\n", "\(fill.stderr)")
    }

    /// Docs/keychain.md: without prompts, a prompt is never left on screen. KeePassXC answers a CreateItem
    /// that replaces an entry another process made with an "Access Request" dialog even with its access
    /// confirmation off, and dismissing the prompt does not close that dialog: the tool replaces such an
    /// entry in place instead. With confirmations on, KeePassXC asks before any read of such an entry: the
    /// tool then fails at once with 77 and shows nothing.
    @Test func withPromptsOffNoCommandLeavesADialogOnScreen() throws {
        let app = uniqueApp()
        let replaces = Harness.keepassxcConfirmationsOff
        try Harness.keepassxcCtl("absent")
        defer { _ = try? Harness.keepassxcCtl("approve") }

        let steps: [(name: String, arguments: [String], input: String, status: Int32)] = [
            ("store", ["token", "set", "t"], "first", 0),
            ("replace", ["token", "set", "--force", "t"], "second", replaces ? 0 : 77),
            ("create", ["tasks", "add", "kept through it all"], "", 0),
            ("rotate", ["db", "rotate-key"], "", replaces ? 0 : 77),
            ("open after rotate", ["tasks", "list"], "", replaces ? 0 : 77),
            ("git store", ["git-credential", "store"], "protocol=https\nhost=h.example\nusername=u\npassword=p1\n", 0),
            ("git replace", ["git-credential", "store"], "protocol=https\nhost=h.example\nusername=u\npassword=p2\n", replaces ? 0 : 77),
        ]
        for step in steps {
            let result = try tool(step.arguments, app: app, input: step.input, prompt: "never")
            #expect(result.status == step.status, "\(step.name): \(result.stderr)")
            if result.status == 77 {
                #expect(result.stderr.contains("asks you to approve this program's access"), "\(step.name): \(result.stderr)")
            }
            #expect(try openDialogs() == "", "\(step.name) left a dialog on screen")
        }

        try Harness.keepassxcCtl("approve")
        #expect(try tool(["token", "get", "t"], app: app, prompt: "always").stdout == (replaces ? "second" : "first"))
        #expect(try tool(["tasks", "list"], app: app, prompt: "always").stdout.contains("kept through it all"))
        let fill = try tool(["git-credential", "get"], app: app, input: "protocol=https\nhost=h.example\n", prompt: "always")
        #expect(fill.stdout == "username=u\npassword=\(replaces ? "p2" : "p1")\n", "\(fill.stderr)")
        if replaces {
            // The rotation finished: one current key, one retired, no pending key left.
            let accounts = try databaseKeyAccounts(app)
            #expect(accounts.filter { $0.hasSuffix(".pending") }.isEmpty, "\(accounts)")
            #expect(accounts.filter { $0.contains(".retired.") }.count == 1, "\(accounts)")
            #expect(accounts.filter { $0.contains("@") }.count == 1, "\(accounts)")
        }
    }

    /// Sync with its keys in KeePassXC: while the database is locked, `sync now` on either device stops at once
    /// with 77 and the locked line (never "the sync key is not in the key store"), and neither the device's
    /// database nor the remote changes; unlocked, the waiting edit goes through.
    @Test func aLockedDatabaseStopsSyncAtOnceAndChangesNothing() throws {
        let work = try TemporaryDirectory()
        let (a, b, remote, id, _) = try syncedPair(under: work.path)
        try b.ok(["tasks", "done", id])
        let (database, files) = (try b.databaseDigest(), try remoteDigest(remote))
        try Harness.keepassxcCtl("lock")
        defer {
            _ = try? Harness.keepassxcCtl("approve")
            if (try? Harness.keepassxcCtl("status").stdout) != "unlocked\n" { _ = try? Harness.keepassxcCtl("unlock") }
        }
        for device in [b, a] {
            var environment = device.environment
            environment["SECURESTORE_PROMPT"] = "never"
            let started = ContinuousClock.now
            let result = try securestore(["sync", "now"], app: device.app, environment: environment)
            #expect(result.status == 77, "\(result.stderr)")
            #expect(result.stderr == lockedLine)
            #expect(ContinuousClock.now - started < .seconds(3), "at once, not after the D-Bus timeout")
        }
        #expect(try b.databaseDigest() == database)
        #expect(try remoteDigest(remote) == files)
        #expect(try openDialogs() == "")

        try Harness.keepassxcCtl("unlock")
        try b.ok(["sync", "now"])
        try a.ok(["sync", "now"])
        #expect(try a.tasks().first?["done"] == "1")
    }
}

import Foundation
import TestSupport
import Testing

/// `securestore token …` against the harness's real gnome-keyring.
@Suite(.serialized) struct TokenCommandTests {
    init() throws { try Harness.require() }

    @Test func setFromStdinGetListDelete() throws {
        let app = uniqueApp()
        let set = try securestore(["token", "set", "github", "--label", "GitHub PAT"], app: app, input: "ghp_token_value_123\n")
        #expect(set.status == 0)
        #expect(set.stdout.isEmpty && set.stderr.isEmpty)

        let get = try securestore(["token", "get", "github"], app: app)
        #expect(get.status == 0)
        #expect(get.stdout == "ghp_token_value_123", "only the secret, without the newline it was piped with")

        // Another client of the store (secret-tool) finds it under the documented attributes.
        #expect(try StoreClient.lookup(service: app, account: "github") == "ghp_token_value_123")

        let list = try securestore(["token", "list"], app: app)
        #expect(list.stdout == "github  GitHub PAT\n")
        let json = try securestore(["--json", "token", "list"], app: app)
        #expect(json.stdout == "[{\"label\":\"GitHub PAT\",\"name\":\"github\"}]\n")
        #expect(!list.stdout.contains("ghp_") && !json.stdout.contains("ghp_"))

        #expect(try securestore(["token", "delete", "github"], app: app).status == 0)
        let gone = try securestore(["token", "get", "github"], app: app)
        #expect(gone.status == 66)
        #expect(gone.stderr.hasPrefix("securestore: no token named 'github'"))
        #expect(try securestore(["token", "delete", "github"], app: app).status == 66)
    }

    @Test func rawKeepsTrailingNewlinesAndEmptyInputIsRefused() throws {
        let app = uniqueApp()
        #expect(try securestore(["token", "set", "--raw", "t"], app: app, input: "line\n").status == 0)
        #expect(try securestore(["token", "get", "t"], app: app).stdout == "line\n")

        let empty = try securestore(["token", "set", "--force", "t"], app: app, input: "")
        #expect(empty.status == 65)
        #expect(empty.stderr.hasPrefix("securestore: no secret given on standard input"))
        #expect(try securestore(["token", "get", "t"], app: app).stdout == "line\n", "unchanged")
    }

    @Test func aSecretOnTheCommandLineIsRefused() throws {
        let app = uniqueApp()
        let result = try securestore(["token", "set", "name", "hunter2"], app: app)
        #expect(result.status == 64)
        #expect(result.stderr.hasPrefix("securestore: unexpected argument"))
        #expect(try securestore(["token", "get", "name"], app: app).status == 66, "nothing stored")
    }

    @Test func oversizeSecretIsRefusedAndTheStoredOneKept() throws {
        let app = uniqueApp()
        #expect(try securestore(["token", "set", "t"], app: app, input: "original").status == 0)
        let result = try securestore(["token", "set", "--force", "t"], app: app, input: String(repeating: "x", count: 70_000))
        #expect(result.status == 65)
        #expect(result.stderr.contains("the limit is 65536 bytes"))
        #expect(!result.stderr.contains("xxxxxxxx"))
        #expect(try securestore(["token", "get", "t"], app: app).stdout == "original")
    }

    @Test(.enabled(if: Harness.isGnomeKeyring, "keyring-ctl drives gnome-keyring")) func lockedKeyringExits77AndLosesNothing() throws {
        let app = uniqueApp()
        #expect(try securestore(["token", "set", "t"], app: app, input: "kept").status == 0)
        try Harness.keyringCtl("lock")
        defer { _ = try? Harness.keyringCtl("unlock") }
        let get = try securestore(["token", "get", "t"], app: app)
        #expect(get.status == 77)
        #expect(get.stderr.hasPrefix("securestore: the keyring collection 'default' is locked"))
        let set = try securestore(["token", "set", "--force", "t"], app: app, input: "new")
        #expect(set.status == 77)
        try Harness.keyringCtl("unlock")
        #expect(try securestore(["token", "get", "t"], app: app).stdout == "kept")
    }

    @Test func noSessionBusExits69WithHowToStartOne() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        environment["SECURESTORE_KEYSTORE"] = "secret-service"
        let result = try securestore(["token", "get", "t"], app: uniqueApp(), environment: environment)
        #expect(result.status == 69)
        #expect(result.stderr.hasPrefix("securestore: no D-Bus session bus"))
        #expect(result.stderr.contains("dbus-run-session"))
        #expect(result.stderr.contains("(hint: without a Secret Service, keep keys in an encrypted key file: --keystore file"))
        #expect(result.stderr.split(separator: "\n").count == 1, "one line")
    }

    @Test func secretsAppearInNoFileTheToolWrites() throws {
        let app = uniqueApp()
        let secret = "ghp_SECRETMARKER\(UUID().uuidString.prefix(8))"
        #expect(try securestore(["token", "set", "t"], app: app, input: secret).status == 0)
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        let root = try #require(Harness.root)
        // gnome-keyring's own files are encrypted: nothing anywhere under the harness's HOME and XDG
        // directories holds the secret in the clear.
        #expect(filesContaining(secret, under: root).isEmpty)
    }
}

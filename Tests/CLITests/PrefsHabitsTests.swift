import Foundation
import TestSupport
import Testing

/// Habits of `prefs`: values from standard input, secrets refused, a healthy file reset only when asked twice.
@Suite(.serialized) struct PrefsHabitsTests {
    init() throws { try Harness.require() }

    private func directory(_ app: String) throws -> String { try #require(Harness.root) + "/config/\(app)" }

    private func snapshot(_ app: String) throws -> [String: Data] {
        Dictionary(uniqueKeysWithValues: filesUnder(try directory(app)).map { ($0.path, $0.data) })
    }

    @Test func setReadsTheValueFromStandardInput() throws {
        let app = uniqueApp()
        #expect(try securestore(["prefs", "set", "greeting", "--stdin"], app: app, input: "hello world\n").status == 0)
        #expect(try securestore(["prefs", "get", "greeting"], app: app).stdout == "hello world\n")
        #expect(try securestore(["prefs", "set", "--int", "width", "--stdin"], app: app, input: "800\n").status == 0)
        #expect(try securestore(["--json", "prefs", "get", "width"], app: app).stdout
            == "{\"key\":\"width\",\"type\":\"Int\",\"value\":800}\n")

        let before = try snapshot(app)
        let both = try securestore(["prefs", "set", "greeting", "hi", "--stdin"], app: app, input: "x")
        #expect(both.status == 64)
        #expect(both.stderr.hasPrefix("securestore: give VALUE or --stdin, not both\n"))
        let bad = try securestore(["prefs", "set", "--int", "width", "--stdin"], app: app, input: "s3cr3t-wide\n")
        #expect(bad.status == 64)
        #expect(bad.stderr.hasPrefix("securestore: VALUE is not an integer\n"))
        #expect(!bad.stderr.contains("s3cr3t"), "a value from standard input is never repeated")
        let missing = try securestore(["prefs", "set", "greeting"], app: app)
        #expect(missing.status == 64)
        #expect(missing.stderr.hasPrefix("securestore: missing VALUE (or --stdin to read it from standard input)\n"))
        #expect(try snapshot(app) == before, "nothing changed")
    }

    @Test func aSecretLookingValueIsRefusedNamingTheRuleNeverTheValueUnlessForced() throws {
        let app = uniqueApp()
        let token = "ghp_" + String(String(repeating: "Q7w9E2r4", count: 5).prefix(36))
        // Refused before anything is created.
        let first = try securestore(["prefs", "set", "githubToken", token], app: app)
        #expect(first.status == 65)
        #expect(!FileManager.default.fileExists(atPath: try directory(app)))

        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        let before = try snapshot(app)
        for (arguments, input) in [(["prefs", "set", "githubToken", token], ""), (["prefs", "set", "gh", "--stdin"], token + "\n")] {
            let refused = try securestore(arguments, app: app, input: input)
            #expect(refused.status == 65)
            #expect(refused.stdout.isEmpty)
            #expect(refused.stderr == "securestore: refusing to store preference '\(arguments[2])': its value looks like a "
                + "secret (GitHub token prefix (ghp_, gho_, github_pat_...) [github-token]); nothing was changed (hint: "
                + "keep secrets in the key store (keyring or key file): `securestore token set NAME` reads one from standard input, "
                + "`securestore prefs move-to-keychain KEY` moves a stored one; --force stores it here anyway)\n")
            #expect(!refused.stderr.contains("Q7w9E2r4"))
        }
        let password = try securestore(["prefs", "set", "dbPassword", "--stdin"], app: app, input: "hunter2-but-longer\n")
        #expect(password.status == 65)
        #expect(password.stderr.contains("[password-name]"))
        #expect(!password.stderr.contains("hunter2"))
        #expect(try snapshot(app) == before, "the preferences are byte-identical")

        let forced = try securestore(["prefs", "set", "--force", "githubToken", "--stdin"], app: app, input: token)
        #expect(forced.status == 0)
        #expect(try securestore(["prefs", "get", "githubToken"], app: app).stdout == token + "\n")
        #expect(try securestore(["prefs", "audit"], app: app).status == 1, "the audit still reports it")
    }

    @Test func resetOfAHealthyFileNeedsForceOrAYesOnATerminal() throws {
        let app = uniqueApp()
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        let path = try directory(app) + "/preferences.json"
        let before = try snapshot(app)

        let piped = try securestore(["prefs", "reset"], app: app)
        #expect(piped.status == 65)
        #expect(piped.stderr == "securestore: the preferences file '\(path)' is not damaged (1 key); nothing was "
            + "changed (hint: --force moves it aside anyway)\n")
        #expect(try snapshot(app) == before)

        let declined = try securestoreOnTerminal(["prefs", "reset"], app: app, answers: ["n"])
        #expect(declined.status == 65)
        #expect(declined.screen.contains("is not damaged (1 key). Move it aside and start fresh? [y/N] "))
        #expect(declined.screen.contains("securestore: not reset; nothing was changed"))
        #expect(try snapshot(app) == before)

        let accepted = try securestoreOnTerminal(["prefs", "reset"], app: app, answers: ["y"])
        #expect(accepted.status == 0)
        #expect(accepted.screen.contains("moved \(path) to \(path).reset-"))
        #expect(!FileManager.default.fileExists(atPath: path))

        #expect(try securestore(["prefs", "set", "theme", "light"], app: app).status == 0)
        let forced = try securestore(["prefs", "reset", "--force"], app: app)
        #expect(forced.status == 0)
        #expect(forced.stderr.hasPrefix("moved \(path) to \(path).reset-"))
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
